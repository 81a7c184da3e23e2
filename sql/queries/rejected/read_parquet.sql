-- expect-error: DP220 NotSupportedError
-- why: a file reader
SELECT * FROM read_parquet('examples/data/adult.parquet');
