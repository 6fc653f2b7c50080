int main(void) {
    for (;;) { }
}
