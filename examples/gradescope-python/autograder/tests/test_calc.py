import unittest

from gradescope_utils.autograder_utils.decorators import number, visibility, weight


class TestCalc(unittest.TestCase):
    def setUp(self):
        import calc

        self.calc = calc

    @weight(2)
    @number("1.1")
    def test_add(self):
        """add adds two numbers"""
        self.assertEqual(self.calc.add(2, 3), 5)

    @weight(3)
    @number("1.2")
    def test_mean(self):
        """mean of a list"""
        self.assertEqual(self.calc.mean([1, 2, 3, 4]), 2.5)

    @weight(1)
    @number("1.3")
    @visibility("after_due_date")
    def test_mean_empty(self):
        """mean of an empty list is 0.0"""
        self.assertEqual(self.calc.mean([]), 0.0)

    @weight(4)
    @number("2.1")
    @visibility("hidden")
    def test_mean_large(self):
        """mean of many numbers"""
        self.assertEqual(self.calc.mean(list(range(1001))), 500.0)
