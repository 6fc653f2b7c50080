"""mario/less in check50's own format (shaped like CS50's): a right-aligned pyramid."""
import check50
import check50.c


@check50.check()
def exists():
    """mario.c exists"""
    check50.exists("mario.c")
    check50.include("1.txt", "2.txt", "8.txt")


@check50.check(exists)
def compiles():
    """mario.c compiles"""
    check50.c.compile("mario.c", cc="gcc")


@check50.check(compiles)
def test_reject_negative():
    """rejects a height of -1"""
    check50.run("./mario").stdin("-1").reject()


@check50.check(compiles)
def test1():
    """handles a height of 1 correctly"""
    check50.run("./mario").stdin("1").stdout(open("1.txt").read(), regex=False).exit(0)


@check50.check(compiles)
def test2():
    """handles a height of 2 correctly"""
    check50.run("./mario").stdin("2").stdout(open("2.txt").read(), regex=False).exit(0)


@check50.check(compiles)
def test8():
    """handles a height of 8 correctly"""
    check50.run("./mario").stdin("8").stdout(open("8.txt").read(), regex=False).exit(0)


@check50.check(compiles)
def test9():
    """rejects a height of 9, and then accepts a height of 2"""
    (check50.run("./mario").stdin("9").reject()
        .stdin("2").stdout(open("2.txt").read(), regex=False).exit(0))
