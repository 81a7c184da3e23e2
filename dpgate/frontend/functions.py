"""The DuckDB built-in functions an analyst may call by name: a positive list, reviewed for DuckDB 1.4–1.5 and 2.0.

Every statement an analyst writes — public ones over public tables and releases included — may
call a DuckDB function that sqlglot does not model (an ``Anonymous`` call) only if it is named
here (``classify.check_functions``; DP220 otherwise, charging nothing). What a DP statement may
compute over protected rows is narrower still (``allowlist.RULES``).

Left out, besides what reaches files, the network, settings or the catalog (``classify``):
- functions that take SQL text and bind or plan it against the live catalog:
  ``json_serialize_plan`` (its optimized plan carried protected tables' row counts and distinct
  counts out of a free public statement), ``json_serialize_sql``,
  ``json_deserialize_sql``;
- counters and identifiers of the engine's own work: ``current_query_id`` (it counted the
  statements dpgate ran for the previous DP query, a number that depended on whether a subject was
  over its bound), ``current_transaction_id``, ``txid_current``,
  ``current_connection_id``, ``current_query``;
- introspection and side effects: ``stats`` (an expression's storage statistics),
  ``get_block_size`` (a macro over ``pragma_database_size``), ``write_log``, ``sleep_ms``;
- functions that recurse once per nesting level of a JSON text: ``json_structure`` and
  ``json_group_structure`` overflowed the stack and killed the process at a depth of about
  80,000 (a text ``string_agg`` can gather), ``json_contains`` likewise;
- new in DuckDB 2.0, each a way around the checks by name:
  ``index_key`` names a table (and an index on it) in a STRUCT of strings: a lookup in the catalog
  that the checks of the tables a statement reads (``classify``) never see, whose errors say
  whether a schema or table exists, a protected one's too; ``to_aggregate_state`` calls an
  aggregate named in a string -- any aggregate, a refused or an unreviewed one included, past
  the name check here -- and builds its internal state from arbitrary values;
  ``combine_aggr`` combines internal aggregate states (no analyst statement can make one: the
  parser does not read EXPORT_STATE, and ``to_aggregate_state`` is refused), and its
  multiplicity argument repeats a list or string state that many times, memory set by an
  argument without ``repeat``'s 4 GB cap (10 elements x 1e11 exhausted the memory limit in one call);
- what builds a VARIANT of any nesting: ``variant_bytes_to_variant`` (from bytes the analyst
  chooses), 2.0's ``variant_group_array`` and ``variant_group_object`` (their rows cast to VARIANT,
  JSON text included). DuckDB's work on a VARIANT (comparing it, writing it as text or to the client,
  ``variant_contains``, ``variant_normalize``, ``variant_comparator``) recurses once per nesting level,
  and 100,000 levels -- a JSON text ``string_agg`` gathers -- killed the process on 1.5.6 and 2.0.1
  alike; ``built`` refuses casts to VARIANT for the same reason. The functions that read one stay
  (a stored VARIANT column is the owner's data).

DuckDB's internal spellings (``__internal_*``, ``__cast``, ``__between``) are not listed, so
they are refused as unreviewed (DuckDB itself refuses a direct call to ``__cast`` and ``__between``).

Reviewed for DuckDB 2.0 and accepted: each reads only its arguments (no file, network, setting,
catalog entry, SQL text or counter of the engine), and is deterministic except where said.
``assert_true`` and ``if`` are macros over CASE and ``error`` (accepted already);
``binom`` is C(n, k) as HUGEINT (no loop over k: an out-of-range error past HUGEINT);
``bitstring_byte_comparable`` and ``variant_comparator`` are sort keys of their argument, like
``create_sort_key``, and so are the ``collate_<locale>`` functions (``_COLLATION_LOCALES``);
``decimal_average`` and ``decimal_division`` are exact DECIMAL arithmetic (the latter raises on a
zero divisor, whatever ``error_on_division_by_zero`` says, and checks its scale argument: 0-38);
``hive_partition_component`` and ``path_join`` only format text (``path_join`` normalises the
components it is given; it reads no file system and does not expand ``~``);
``invoke`` applies a lambda to its arguments (DuckDB binds no subquery inside a lambda; ``built``
sizes its body with the parameters bound to its arguments, else nesting it grew values unseen);
``json_copy_strftime_if_date`` / ``_if_timestamp`` are macros over ``strftime``; the JSON functions
``json_deep_merge``, ``json_insert``, ``json_merge_patch_diff``, ``json_normalize``, ``json_remove``,
``json_replace``, ``json_set``, ``json_strip_nulls`` edit a document given as an argument (output
linear in the input); ``lttb`` keeps at most ``n`` of its rows' points (never more than it read);
``map_type_id_to_pg_oid`` is a CASE over integers; ``overlay`` is SQL's OVERLAY (its output at most
its two strings); ``st_asgeojson``, ``st_geomfromgeojson`` and ``vertex_extract`` convert geometries;
the other ``variant_*`` functions read VARIANT values. What a public statement may build with
them is bounded by ``built`` (``lttb`` gathers rows, sort keys grow their text).
None of these is on the allowlist of
what a DP statement may compute over protected rows (``allowlist.RULES``): they serve public statements.

Accepted here and bounded in public statements by ``built``, with the costs ``growth`` lists: aggregates
whose state DuckDB keeps outside its memory limit are refused there (``approx_top_k``,
``reservoir_quantile``; on 1.x ``mode``, ``histogram``, ``entropy``, ``approx_quantile``,
``bitstring_agg``), and so are set operations, maps and ``list_reduce`` over a gathered list, regular
expressions with large programs, and ``json_merge_patch`` of a gathered text (it recursed once per
nesting level and killed DuckDB 1.5.6). ``list_aggregate`` and its aliases (``BY_NAME``) run an
aggregate named in a string: the name is checked as a call.

A function a newer DuckDB adds is refused until it is reviewed and added here
(``tests/frontend/test_functions.py`` lists the installed DuckDB's unreviewed ones).
"""

from __future__ import annotations

#: The locales (and ``noaccent``) of DuckDB's collation functions: ``icu_collate_<locale>`` (1.4-1.5 and 2.x: the
#: ICU sort key of the argument, as text) and ``collate_<locale>`` (2.x: the same key as a BLOB). A sort key is
#: a function of the string alone. 2.0 added the locales aa, bal, blo, cu, fy, lij, no, nso, sgs, ssy, st,
#: tn, vo and dropped yue, yue_cn.
_COLLATION_LOCALES = """
    aa af am ar ar_sa as az bal be bg blo bn bo br bs ca ceb chr cs cu cy da de de_at dsb dz ee el en en_us eo es
    et fa fa_af ff fi fil fo fr fr_ca fy ga gl gu ha haw he he_il hi hr hsb hu hy id id_id ig is it ja ka kk kl km
    kn ko kok ku ky lb lij lkt ln lo lt lv mk ml mn mr ms mt my nb nb_no ne nl nn no noaccent nso om or pa pa_in pl
    ps pt ro ru sa se sgs si sk sl smn sq sr sr_ba sr_me sr_rs ssy st sv sw ta te th tk tn to tr ug uk ur uz vi vo
    wae wo xh yi yo yue yue_cn zh zh_cn zh_hk zh_mo zh_sg zh_tw zu
""".split()

#: Scalar functions, macros, aggregates and window functions (lower case).
REVIEWED = frozenset(
    """
    abs acos acosh add age aggregate ago alias any_value apply approx_count_distinct approx_quantile approx_top_k
    arbitrary arg_max arg_max_null arg_max_nulls_last arg_min arg_min_null arg_min_nulls_last argmax argmin
    array_agg array_aggr array_aggregate array_append array_apply array_cat array_concat array_contains
    array_cosine_distance array_cosine_similarity array_cross_product array_distance array_distinct
    array_dot_product array_extract array_filter array_grade_up array_has array_has_all array_has_any array_indexof
    array_inner_product array_intersect array_length array_negative_dot_product array_negative_inner_product
    array_pop_back array_pop_front array_position array_prepend array_push_back array_push_front array_reduce
    array_resize array_reverse array_reverse_sort array_select array_slice array_sort array_to_json array_to_string
    array_to_string_comma_default array_transform array_unique array_value array_where array_zip ascii asin asinh
    assert_true atan atan2 atanh avg bar base64 bin binom bit_and bit_count bit_length bit_or bit_position bit_xor
    bitstring bitstring_agg bitstring_byte_comparable bool_and bool_or can_cast_implicitly cardinality cast_to_type
    cbrt ceil ceiling century char_length character_length chr combine concat concat_ws constant_or_null contains
    corr cos cosh cot count count_if count_star countif covar_pop covar_samp create_sort_key cume_dist current_date
    current_localtime current_localtimestamp current_role current_user damerau_levenshtein date_add date_diff
    date_part date_sub date_trunc datediff datepart datesub datetrunc day dayname dayofmonth dayofweek dayofyear
    days_in_month decade decimal_average decimal_division decode degrees dense_rank divide editdist3 element_at
    encode ends_with entropy enum_code enum_first enum_last enum_range enum_range_boundary epoch epoch_ms epoch_ns
    epoch_us equi_width_bins era error even exp factorial favg fdiv fill filter finalize first first_value flatten
    floor fmod format format_bytes format_pg_type formatreadabledecimalsize formatreadablesize from_base64
    from_binary from_hex from_json from_json_strict fsum gamma gcd gen_random_uuid generate_series
    generate_subscripts geomean geometric_mean get_bit get_current_time get_current_timestamp get_type grade_up
    greatest greatest_common_divisor group_concat hamming hash hex histogram histogram_exact
    hive_partition_component hour icu_sort_key if ilike_escape in_search_path inet_client_addr inet_client_port
    inet_server_addr inet_server_port instr invoke is_histogram_other_bin isfinite isinf isnan isodow isoyear
    jaccard jaro_similarity jaro_winkler_similarity json json_array json_array_length json_copy_strftime_if_date
    json_copy_strftime_if_timestamp json_deep_merge json_exists json_extract json_extract_path
    json_extract_path_text json_extract_string json_group_array json_group_object json_insert json_keys
    json_merge_patch json_merge_patch_diff json_normalize json_object json_pretty json_quote json_remove
    json_replace json_set json_strip_nulls json_transform json_transform_strict json_type json_valid json_value
    julian kahan_sum kurtosis kurtosis_pop lag last last_day last_value lcase lcm lead least least_common_multiple
    left left_grapheme len length length_grapheme levenshtein lgamma like_escape list list_aggr list_aggregate
    list_any_value list_append list_apply list_approx_count_distinct list_avg list_bit_and list_bit_or list_bit_xor
    list_bool_and list_bool_or list_cat list_concat list_contains list_cosine_distance list_cosine_similarity
    list_count list_distance list_distinct list_dot_product list_element list_entropy list_extract list_filter
    list_first list_grade_up list_has list_has_all list_has_any list_histogram list_indexof list_inner_product
    list_intersect list_kurtosis list_kurtosis_pop list_last list_mad list_max list_median list_min list_mode
    list_negative_dot_product list_negative_inner_product list_pack list_position list_prepend list_product
    list_reduce list_resize list_reverse list_reverse_sort list_select list_sem list_skewness list_slice list_sort
    list_stddev_pop list_stddev_samp list_string_agg list_sum list_transform list_unique list_value list_var_pop
    list_var_samp list_where list_zip listagg ln log log10 log2 lower lpad ltrim lttb mad make_date make_time
    make_timestamp make_timestamp_ms make_timestamp_ns make_timestamptz make_type map map_concat map_contains
    map_contains_entry map_contains_value map_entries map_extract map_extract_value map_from_entries map_keys
    map_to_pg_oid map_type_id_to_pg_oid map_values max max_by md5 md5_number md5_number_lower md5_number_upper mean
    median microsecond millennium millisecond min min_by minute mismatches mod mode month monthname multiply
    nanosecond nextafter nfc_normalize normalized_interval not_ilike_escape not_like_escape now nth_value ntile
    nullif octet_length ord overlay parse_dirname parse_dirpath parse_duckdb_log_message parse_filename
    parse_formatted_bytes parse_path path_join percent_rank pi position pow power prefix printf product quantile
    quantile_cont quantile_disc quarter radians random range rank rank_dense reduce regexp_escape regexp_extract
    regexp_extract_all regexp_full_match regexp_matches regexp_replace regexp_split_to_array regexp_split_to_table
    regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy remap_struct repeat
    replace replace_type reservoir_quantile reverse right right_grapheme round round_even roundbankers row
    row_number row_to_json rpad rtrim second sem session_user set_bit sha1 sha256 sign signbit sin sinh skewness
    split split_part sqrt st_asbinary st_asgeojson st_astext st_aswkb st_aswkt st_crs st_geomfromgeojson
    st_geomfromwkb st_intersects_extent st_setcrs starts_with stddev stddev_pop stddev_samp str_split
    str_split_regex strftime string_agg string_split string_split_regex string_to_array strip_accents strlen strpos
    strptime struct_concat struct_contains struct_extract struct_extract_at struct_has struct_indexof struct_insert
    struct_keys struct_pack struct_position struct_update struct_values substr substring substring_grapheme subtract
    suffix sum sum_no_overflow sumkahan switch tan tanh time_bucket timetz_byte_comparable timezone timezone_hour
    timezone_minute to_base to_base64 to_binary to_centuries to_days to_decades to_hex to_hours to_json
    to_microseconds to_millennia to_milliseconds to_minutes to_months to_quarters to_seconds to_timestamp to_weeks
    to_years today transaction_timestamp translate trim trunc try_strptime typeof ucase unbin unhex unicode
    union_extract union_tag union_value unpivot_list upper url_decode url_encode user uuid uuid_extract_timestamp
    uuid_extract_version uuidv4 uuidv7 var_pop var_samp variance variant_array_length variant_comparator
    variant_contains variant_exists variant_extract variant_extract_string variant_keys variant_normalize
    variant_to_parquet_variant variant_type variant_typeof vector_type version vertex_extract wavg week weekday
    weekofyear weighted_avg xor year yearweek
    """.split()
) | {f"{prefix}_{locale}" for prefix in ("collate", "icu_collate") for locale in _COLLATION_LOCALES}

#: Functions that run an aggregate named by their second argument, a string constant: the name is checked
#: as a call (``classify.check_functions``), so a refused or unreviewed aggregate is not run by name.
BY_NAME = frozenset({"list_aggregate", "array_aggregate", "list_aggr", "array_aggr", "aggregate"})

#: Reviewed and refused (see the module docstring), by name.
REFUSED = frozenset(
    """
    json_serialize_plan json_serialize_sql json_deserialize_sql current_query_id current_transaction_id txid_current
    current_connection_id current_query stats get_block_size write_log sleep_ms
    json_structure json_group_structure json_contains
    index_key to_aggregate_state combine_aggr variant_bytes_to_variant variant_group_array variant_group_object
    """.split()
)
