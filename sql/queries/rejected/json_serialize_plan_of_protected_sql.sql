-- expect-error: DP220 NotSupportedError
-- why: json_serialize_plan binds and optimizes SQL text against the live catalog; the join order of the plan read a protected table's row count and distinct counts out of a free public statement
SELECT json_serialize_plan('SELECT count(*) FROM adult t JOIN range(45556) r ON t.person_id = r.range', optimize := true);
