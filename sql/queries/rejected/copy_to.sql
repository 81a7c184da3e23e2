-- expect-error: DP221 NotSupportedError
-- why: COPY writes files
COPY adult TO '/tmp/adult.csv';
