import java.util.Scanner;

public class Hello {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.print("Name: ");
        System.out.flush();
        String name = in.nextLine();
        if (name.isEmpty()) {
            throw new IllegalStateException("no name");
        }
        System.out.println("Hello, " + name + "!");
    }
}
