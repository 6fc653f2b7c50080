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
};

export function template(languageId: string): string {
  return TEMPLATES[languageId] ?? '';
}
