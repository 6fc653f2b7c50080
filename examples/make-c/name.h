/* Given by the assignment: the one function name.c must provide. */
void greet(const char *name);
