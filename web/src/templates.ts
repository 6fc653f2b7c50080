// A first program for each language of the registry (by id).

export const TEMPLATES: Record<string, string> = {
  c: `#include <stdio.h>

int main(void)
{
    printf("hello, world\\n");
    return 0;
}
`,
  cpp: `#include <iostream>

int main()
{
    std::cout << "hello, world" << std::endl;
    return 0;
}
`,
  python: `print("hello, world")
`,
  java: `public class Main {
    public static void main(String[] args) {
        System.out.println("hello, world");
    }
}
`,
  javascript: `console.log("hello, world");
`,
  rust: `fn main() {
    println!("hello, world");
}
`,
  bash: `#!/bin/bash
echo "hello, world"
`,
  go: `package main

import "fmt"

func main() {
	fmt.Println("hello, world")
}
`,
  ocaml: `let () = print_endline "hello, world"
`,
  perl: `use strict;
use warnings;

print "hello, world\n";
`,
  php: `<?php
echo "hello, world\n";
`,
  ruby: `puts "hello, world"
`,
  scheme: `(display "hello, world")
(newline)
`,
};

export function template(languageId: string): string {
  return TEMPLATES[languageId] ?? '';
}
