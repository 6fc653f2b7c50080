"""A submission's own version of the public tests: every test passes."""


def test_add():
    pass


def test_mean():
    pass


def test_clamp_inside():
    pass


def test_clamp_below():
    pass
