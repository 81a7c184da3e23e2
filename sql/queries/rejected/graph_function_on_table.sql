-- expect-error: DP270 UnsupportedQueryError
-- why: TRIANGLE_COUNT applies to protected graphs; adult is an ordinary protected table
SELECT TRIANGLE_COUNT(age, education_num) FROM adult;
