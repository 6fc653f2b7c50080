import java.util.Scanner;

public class Hello {
    public static void main(String[] args) {
        System.out.print("Name: ");
        System.out.flush();
        String name = new Scanner(System.in).nextLine();
        System.out.println("Hi " + name);
    }
}
