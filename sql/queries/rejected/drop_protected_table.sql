-- expect-error: DP320 PolicyError
-- why: a protected table is the owner's; DROP SYNTHETIC TABLE never touches it
DROP SYNTHETIC TABLE adult;
