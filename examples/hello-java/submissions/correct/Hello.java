import java.util.Scanner;

public class Hello {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.print("Name: ");
        System.out.flush();
        String name = in.hasNextLine() ? in.nextLine().trim() : "";
        System.out.println("Hello, " + (name.isEmpty() ? "stranger" : name) + "!");
    }
}
