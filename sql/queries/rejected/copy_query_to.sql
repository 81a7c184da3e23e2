-- expect-error: DP221 NotSupportedError
-- why: COPY of a query writes files
COPY (SELECT * FROM adult) TO '/tmp/adult.parquet';
