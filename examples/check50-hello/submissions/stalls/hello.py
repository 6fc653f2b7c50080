# Starts its greeting and never finishes it: check50 waits for "hello, David", times out and
# reports what did come (a `Missing`, not a `Mismatch`).
import sys
import time

name = input("Name: ")
sys.stdout.write("hello, ")
sys.stdout.flush()
time.sleep(60)
