"""Stand-in for the `expecttest` package (Debian's python3-torch needs it for
torch.testing._internal.common_utils but does not ship it). Only what the
distributed suite touches: ACCEPT, TestCase and assertExpectedInline."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(expect, actual)

    def assertExpected(self, actual, expect=None, skip=0):
        if expect is not None:
            self.assertMultiLineEqual(expect, actual)
