-- expect-error: DP220 NotSupportedError
-- why: the connection's query counter counted the statements dpgate ran for the previous DP query, a number that depended on whether a subject was over its bound
SELECT current_query_id();
