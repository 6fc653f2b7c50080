"""Hidden tests: students never see this file or its failures' details."""
import calc


def same(got, want):
    assert type(got) is type(want) and got == want, f"expected {want!r}, got {got!r}"


def test_add_negative():
    """add works with negative numbers"""
    same(calc.add(-2, -3), -5)


def test_mean_large():
    """mean of an empty list and of a long one"""
    same(calc.mean([]), 0.0)
    same(calc.mean(list(range(1001))), 500.0)


def test_clamp_above():
    """clamp lowers a number above the bounds"""
    same(calc.clamp(11, 0, 10), 10)


def test_types():
    """results are plain numbers"""
    assert type(calc.add(1, 2)) is int
    assert type(calc.mean([1, 2])) is float
    assert type(calc.clamp(1, 0, 2)) is int
