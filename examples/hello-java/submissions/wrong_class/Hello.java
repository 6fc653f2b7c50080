import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.print("Name: ");
        System.out.println("Hello, " + in.nextLine() + "!");
    }
}
