"""A check50 problem in check50's own format: hello.py prompts for a name and greets it."""
import check50


@check50.check()
def exists():
    """hello.py exists"""
    check50.exists("hello.py")


@check50.check(exists)
def greets():
    """greets David"""
    check50.run("python3 hello.py").stdin("David").stdout("hello, David").exit(0)


@check50.check(exists)
def greets_full_name():
    """greets Grace Hopper by her full name"""
    check50.run("python3 hello.py").stdin("Grace Hopper").stdout("hello, Grace Hopper").exit(0)


@check50.check(greets)
def prompts():
    """prompts with "Name: " before reading"""
    out = check50.run("python3 hello.py").stdin("Ada", prompt=False).stdout()
    if not out.startswith("Name: "):
        raise check50.Mismatch("Name: hello, Ada\n", out)
