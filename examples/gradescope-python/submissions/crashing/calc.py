raise RuntimeError("calc.py crashes when imported")
