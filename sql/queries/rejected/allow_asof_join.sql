-- expect-error: DP251 UnsupportedQueryError
-- why: ASOF JOIN is not a join kind dpgate plans
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) FROM adult a ASOF JOIN country_regions r ON a.native_country >= r.native_country;
