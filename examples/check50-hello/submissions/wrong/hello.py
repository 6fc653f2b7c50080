# Greets by the first name only.
name = input("Name: ")
print(f"hello, {name.split()[0]}")
