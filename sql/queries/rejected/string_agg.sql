-- expect-error: DP253 UnsupportedQueryError
-- why: string_agg collects raw values
SELECT string_agg(occupation, ',') FROM adult;
