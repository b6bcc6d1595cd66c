// The worked examples of /work/shared/protocol/examples.md that need no index machinery,
// copied verbatim (request body, status, response body). Examples 1-68 run in order against
// one database; 74-78 run against a fresh database holding only the graph of example 1.
// Example 38 is example 37's body with the parameters the text gives.

export interface WorkedExample { n: number; title: string; request: string; status: number; response: string }

export const workedExamples: WorkedExample[] = [
  {
    n: 1, title: "Create people, a company and relationships in one write", status: 200,
    request: "{\n  \"request_type\": \"write\",\n  \"query_name\": \"seed_org\",\n  \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"ana\", \"root\": { \"add_n\": { \"label\": \"Person\", \"properties\": [\n          [\"name\", { \"value\": { \"string\": \"Ana\" } }], [\"age\", { \"value\": { \"i64\": 34 } }], [\"city\", { \"value\": { \"string\": \"Lisbon\" } }] ] } } } },\n      { \"query\": { \"name\": \"bruno\", \"root\": { \"add_n\": { \"label\": \"Person\", \"properties\": [\n          [\"name\", { \"value\": { \"string\": \"Bruno\" } }], [\"age\", { \"value\": { \"i64\": 41 } }], [\"city\", { \"value\": { \"string\": \"Porto\" } }] ] } } } },\n      { \"query\": { \"name\": \"carla\", \"root\": { \"add_n\": { \"label\": \"Person\", \"properties\": [\n          [\"name\", { \"value\": { \"string\": \"Carla\" } }], [\"age\", { \"value\": { \"i64\": 29 } }], [\"city\", { \"value\": { \"string\": \"Lisbon\" } }] ] } } } },\n      { \"query\": { \"name\": \"acme\", \"root\": { \"add_n\": { \"label\": \"Company\", \"properties\": [\n          [\"name\", { \"value\": { \"string\": \"Acme\" } }], [\"founded\", { \"value\": { \"i64\": 1999 } }] ] } } } },\n      { \"query\": { \"name\": \"k1\", \"root\": { \"add_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"ana\" } } },\n          \"label\": \"KNOWS\", \"to\": { \"var\": \"bruno\" },\n          \"properties\": [ [\"since\", { \"value\": { \"i64\": 2015 } }] ] } } } },\n      { \"query\": { \"name\": \"k2\", \"root\": { \"add_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"bruno\" } } },\n          \"label\": \"KNOWS\", \"to\": { \"var\": \"carla\" },\n          \"properties\": [ [\"since\", { \"value\": { \"i64\": 2019 } }] ] } } } },\n      { \"query\": { \"name\": \"staff_links\", \"root\": { \"count\": { \"input\": { \"add_e\": {\n          \"input\": { \"has\": {\n            \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n            \"property\": \"city\", \"value\": { \"string\": \"Lisbon\" } } },\n          \"label\": \"WORKS_AT\", \"to\": { \"var\": \"acme\" }, \"properties\": [] } } } } } }\n    ],\n    \"returns\": [\"ana\", \"acme\", \"k1\", \"staff_links\"]\n  } }\n}",
    response: "{ \"acme\": [ { \"$id\": 3 } ], \"ana\": [ { \"$id\": 0 } ], \"k1\": [ { \"$id\": 0 } ], \"staff_links\": 2 }",
  },
  {
    n: 2, title: "All properties of one node", status: 200,
    request: "{ \"request_type\": \"read\", \"query_name\": null, \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"ana\", \"root\": { \"value_map\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } } } } } } ],\n    \"returns\": [\"ana\"] } } }",
    response: "{ \"ana\": [ { \"$id\": 0, \"$label\": \"Person\", \"age\": 34, \"city\": \"Lisbon\", \"name\": \"Ana\" } ] }",
  },
  {
    n: 3, title: "Empty results: null versus [], and a 64-bit ID", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"ghost\", \"root\": { \"value_map\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [99] } } } } } } },\n      { \"query\": { \"name\": \"huge\", \"root\": { \"nodes\": { \"reference\": { \"ids\": [18446744073709551615] } } } } },\n      { \"query\": { \"name\": \"nobody\", \"root\": { \"nodes_where\": { \"predicate\": {\n          \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"constant\": { \"string\": \"Zed\" } } } } } } } }\n    ],\n    \"returns\": [\"ghost\", \"huge\", \"nobody\"] } } }",
    response: "{ \"ghost\": null, \"huge\": null, \"nobody\": [] }",
  },
  {
    n: 4, title: "Filter, sort and select values", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"seniors\", \"root\": { \"values\": {\n      \"input\": { \"order_by\": {\n        \"input\": { \"where\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"predicate\": { \"gte\": { \"left\": { \"property\": \"age\" }, \"right\": { \"constant\": { \"i64\": 30 } } } } } },\n        \"property\": \"age\", \"order\": \"desc\" } },\n      \"properties\": [\"name\", \"age\"] } } } } ],\n    \"returns\": [\"seniors\"] } } }",
    response: "{ \"seniors\": [ { \"age\": 41, \"name\": \"Bruno\" }, { \"age\": 34, \"name\": \"Ana\" } ] }",
  },
  {
    n: 5, title: "count and exists, including the empty cases", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"people\", \"root\": { \"count\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } } } } } },\n      { \"query\": { \"name\": \"in_faro\", \"root\": { \"count\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Faro\" } } } } } } } } } },\n      { \"query\": { \"name\": \"any_in_faro\", \"root\": { \"exists\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Faro\" } } } } } } } } } }\n    ],\n    \"returns\": [\"people\", \"in_faro\", \"any_in_faro\"] } } }",
    response: "{ \"any_in_faro\": false, \"in_faro\": 0, \"people\": 3 }",
  },
  {
    n: 6, title: "id on a collection and on an empty collection", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"lisbon_ids\", \"root\": { \"id\": { \"input\": { \"has\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"has_key\": { \"property\": \"city\" } } } },\n          \"property\": \"city\", \"value\": { \"string\": \"Lisbon\" } } } } } } },\n      { \"query\": { \"name\": \"faro_ids\", \"root\": { \"id\": { \"input\": { \"has\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"has_key\": { \"property\": \"city\" } } } },\n          \"property\": \"city\", \"value\": { \"string\": \"Faro\" } } } } } } }\n    ],\n    \"returns\": [\"lisbon_ids\", \"faro_ids\"] } } }",
    response: "{ \"faro_ids\": [], \"lisbon_ids\": [0, 2] }",
  },
  {
    n: 7, title: "label, with IDs in caller order", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"kinds\", \"root\": { \"label\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [3, 0] } } } } } } } ],\n    \"returns\": [\"kinds\"] } } }",
    response: "{ \"kinds\": [\"Company\", \"Person\"] }",
  },
  {
    n: 8, title: "values drops rows that have none of the properties", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"founding\", \"root\": { \"values\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"properties\": [\"founded\"] } } } } ],\n    \"returns\": [\"founding\"] } } }",
    response: "{ \"founding\": [ { \"founded\": 1999 } ] }",
  },
  {
    n: 9, title: "project with renaming, arithmetic and a conditional", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"cards\", \"root\": { \"project\": {\n      \"input\": { \"order_by\": {\n        \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n        \"property\": \"name\", \"order\": \"asc\" } },\n      \"projections\": [\n        { \"property\": { \"source\": \"name\", \"alias\": \"who\" } },\n        { \"expr\": { \"alias\": \"next_age\", \"expr\": { \"add\": { \"left\": { \"property\": \"age\" }, \"right\": { \"constant\": { \"i64\": 1 } } } } } },\n        { \"expr\": { \"alias\": \"tier\", \"expr\": { \"case\": {\n            \"when_then\": [ { \"when\": { \"gte\": { \"left\": { \"property\": \"age\" }, \"right\": { \"constant\": { \"i64\": 35 } } } },\n                             \"then\": { \"constant\": { \"string\": \"senior\" } } } ],\n            \"else_expr\": { \"constant\": { \"string\": \"junior\" } } } } } }\n      ] } } } } ],\n    \"returns\": [\"cards\"] } } }",
    response: "{ \"cards\": [\n  { \"next_age\": 35.0, \"tier\": \"junior\", \"who\": \"Ana\" },\n  { \"next_age\": 42.0, \"tier\": \"senior\", \"who\": \"Bruno\" },\n  { \"next_age\": 30.0, \"tier\": \"junior\", \"who\": \"Carla\" } ] }",
  },
  {
    n: 10, title: "edge_properties", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"first_edge\", \"root\": { \"edge_properties\": {\n      \"input\": { \"edges\": { \"reference\": { \"ids\": [0] } } } } } } } ],\n    \"returns\": [\"first_edge\"] } } }",
    response: "{ \"first_edge\": [ { \"$from\": 0, \"$id\": 0, \"$label\": \"KNOWS\", \"$to\": 1, \"since\": 2015 } ] }",
  },
  {
    n: 11, title: "Neighbors in both directions; per-row de-duplication and dedup", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"around_bruno\", \"root\": { \"both\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"label\": \"KNOWS\" } } } },\n      { \"query\": { \"name\": \"echo\", \"root\": { \"id\": { \"input\": { \"dedup\": { \"input\": { \"both\": {\n          \"input\": { \"both\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"label\": \"KNOWS\" } },\n          \"label\": \"KNOWS\" } } } } } } } },\n      { \"query\": { \"name\": \"echo_count\", \"root\": { \"count\": { \"input\": { \"both\": {\n          \"input\": { \"both\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"label\": \"KNOWS\" } },\n          \"label\": \"KNOWS\" } } } } } }\n    ],\n    \"returns\": [\"around_bruno\", \"echo\", \"echo_count\"] } } }",
    response: "{ \"around_bruno\": [ { \"$id\": 0 }, { \"$id\": 2 } ], \"echo\": [1], \"echo_count\": 2 }",
  },
  {
    n: 12, title: "Edges out of a node, projecting endpoint data", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"links\", \"root\": { \"project\": {\n      \"input\": { \"out_e\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } } } },\n      \"projections\": [\n        { \"property\": { \"source\": \"$id\", \"alias\": \"edge\" } },\n        { \"property\": { \"source\": \"$label\", \"alias\": \"type\" } },\n        { \"property\": { \"source\": \"$to\", \"alias\": \"target\" } },\n        { \"property\": { \"source\": \"$to.name\", \"alias\": \"target_name\" } },\n        { \"property\": { \"source\": \"since\", \"alias\": \"since\" } } ] } } } } ],\n    \"returns\": [\"links\"] } } }",
    response: "{ \"links\": [\n  { \"edge\": 0, \"since\": 2015, \"target\": 1, \"target_name\": \"Bruno\", \"type\": \"KNOWS\" },\n  { \"edge\": 2, \"target\": 3, \"target_name\": \"Acme\", \"type\": \"WORKS_AT\" } ] }",
  },
  {
    n: 13, title: "Later entries build on earlier ones; only returned names appear", status: 200,
    request: "{ \"request_type\": \"read\", \"query_name\": \"company_staff\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"company\", \"root\": { \"limit\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"and\": { \"predicates\": [\n            { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Company\" } } } },\n            { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"constant\": { \"string\": \"Acme\" } } } } ] } } } },\n          \"count\": { \"literal\": 1 } } } } },\n      { \"query\": { \"name\": \"employees\", \"root\": { \"values\": {\n          \"input\": { \"in\": { \"input\": { \"nodes\": { \"reference\": { \"var\": \"company\" } } }, \"label\": \"WORKS_AT\" } },\n          \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"headcount\", \"root\": { \"count\": {\n          \"input\": { \"in\": { \"input\": { \"nodes\": { \"reference\": { \"var\": \"company\" } } }, \"label\": \"WORKS_AT\" } } } } } }\n    ],\n    \"returns\": [\"employees\", \"headcount\"] } } }",
    response: "{ \"employees\": [ { \"name\": \"Ana\" }, { \"name\": \"Carla\" } ], \"headcount\": 2 }",
  },
  {
    n: 14, title: "Typed parameters: string array and integer", status: 200,
    request: "{\n  \"request_type\": \"read\",\n  \"query_name\": \"people_filter\",\n  \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"matches\", \"root\": { \"value_map\": {\n      \"input\": { \"where\": {\n        \"input\": { \"nodes_where\": { \"predicate\": { \"and\": { \"predicates\": [\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } },\n          { \"is_in\": { \"value\": { \"property\": \"city\" }, \"values\": { \"param\": \"cities\" } } } ] } } } },\n        \"predicate\": { \"gte\": { \"left\": { \"property\": \"age\" }, \"right\": { \"param\": \"min_age\" } } } } },\n      \"properties\": [\"name\", \"city\"] } } } } ],\n    \"returns\": [\"matches\"] } },\n  \"parameters\": { \"cities\": [\"Lisbon\", \"Porto\"], \"min_age\": 30 },\n  \"parameter_types\": { \"cities\": { \"array\": \"string\" }, \"min_age\": \"i64\" }\n}",
    response: "{ \"matches\": [ { \"city\": \"Lisbon\", \"name\": \"Ana\" }, { \"city\": \"Porto\", \"name\": \"Bruno\" } ] }",
  },
  {
    n: 15, title: "Untyped parameters", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"who\", \"root\": { \"id\": { \"input\": { \"nodes_where\": { \"predicate\":\n      { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"param\": \"person\" } } } } } } } } } ],\n    \"returns\": [\"who\"] } },\n  \"parameters\": { \"person\": \"Carla\" } }",
    response: "{ \"who\": [2] }",
  },
  {
    n: 16, title: "Page through a sorted list with parameter bounds", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"page\", \"root\": { \"values\": {\n      \"input\": { \"range\": {\n        \"input\": { \"order_by\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"property\": \"name\", \"order\": \"asc\" } },\n        \"start\": { \"expr\": { \"param\": \"from\" } }, \"end\": { \"expr\": { \"param\": \"to\" } } } },\n      \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"page\"] } },\n  \"parameters\": { \"from\": 1, \"to\": 3 } }",
    response: "{ \"page\": [ { \"name\": \"Bruno\" }, { \"name\": \"Carla\" } ] }",
  },
  {
    n: 17, title: "limit 1 makes an entry \"at most one\"", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"youngest\", \"root\": { \"value_map\": { \"input\": { \"limit\": {\n          \"input\": { \"order_by\": {\n            \"input\": { \"nodes_where\": { \"predicate\": { \"has_key\": { \"property\": \"age\" } } } },\n            \"property\": \"age\", \"order\": \"asc\" } },\n          \"count\": { \"literal\": 1 } } }, \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"youngest_in_faro\", \"root\": { \"value_map\": { \"input\": { \"limit\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Faro\" } } } } } },\n          \"count\": { \"literal\": 1 } } }, \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"first_two_in_faro\", \"root\": { \"value_map\": { \"input\": { \"limit\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Faro\" } } } } } },\n          \"count\": { \"literal\": 2 } } }, \"properties\": [\"name\"] } } } }\n    ],\n    \"returns\": [\"youngest\", \"youngest_in_faro\", \"first_two_in_faro\"] } } }",
    response: "{ \"first_two_in_faro\": [], \"youngest\": [ { \"name\": \"Carla\" } ], \"youngest_in_faro\": null }",
  },
  {
    n: 18, title: "Parameter-valued edge filter and node reference", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"old_links\", \"root\": { \"id\": { \"input\": { \"edge_has\": {\n      \"input\": { \"out_e\": { \"input\": { \"nodes\": { \"reference\": { \"param\": \"who\" } } }, \"label\": \"KNOWS\" } },\n      \"property\": \"since\", \"value\": { \"expr\": { \"param\": \"year\" } } } } } } } } ],\n    \"returns\": [\"old_links\"] } },\n  \"parameters\": { \"who\": [0, 1], \"year\": 2019 },\n  \"parameter_types\": { \"who\": { \"array\": \"i64\" }, \"year\": \"i64\" } }",
    response: "{ \"old_links\": [1] }",
  },
  {
    n: 19, title: "Multi-key sort with a missing key", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"sorted\", \"root\": { \"values\": {\n      \"input\": { \"order_by_multiple\": { \"input\": { \"nodes\": { \"reference\": \"all\" } },\n                                        \"orderings\": [ [\"age\", \"asc\"], [\"name\", \"asc\"] ] } },\n      \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"sorted\"] } } }",
    response: "{ \"sorted\": [ { \"name\": \"Acme\" }, { \"name\": \"Carla\" }, { \"name\": \"Ana\" }, { \"name\": \"Bruno\" } ] }",
  },
  {
    n: 20, title: "group and group_count", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"by_city\", \"root\": { \"group\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"property\": \"city\" } } } },\n      { \"query\": { \"name\": \"city_counts\", \"root\": { \"group_count\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"property\": \"city\" } } } }\n    ],\n    \"returns\": [\"by_city\", \"city_counts\"] } } }",
    response: "{ \"by_city\": [ { \"city\": \"Lisbon\", \"count\": 2, \"ids\": [0, 2] }, { \"city\": \"Porto\", \"count\": 1, \"ids\": [1] } ],\n  \"city_counts\": [ { \"city\": \"Lisbon\", \"count\": 2 }, { \"city\": \"Porto\", \"count\": 1 } ] }",
  },
  {
    n: 21, title: "aggregate_by", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"avg_age\", \"root\": { \"aggregate_by\": {\n          \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"function\": \"mean\", \"property\": \"age\" } } } },\n      { \"query\": { \"name\": \"max_age\", \"root\": { \"aggregate_by\": {\n          \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"function\": \"max\", \"property\": \"age\" } } } },\n      { \"query\": { \"name\": \"total_age\", \"root\": { \"aggregate_by\": {\n          \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"function\": \"sum\", \"property\": \"age\" } } } }\n    ],\n    \"returns\": [\"avg_age\", \"max_age\", \"total_age\"] } } }",
    response: "{ \"avg_age\": [ { \"age_Mean\": 34.666666666666664 } ], \"max_age\": [ { \"age_Max\": 41.0 } ], \"total_age\": [ { \"age_Sum\": 104.0 } ] }",
  },
  {
    n: 22, title: "repeat with emit: after, and what emit: none returns when rows run out", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"reach\", \"root\": { \"values\": { \"input\": { \"repeat\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n          \"config\": { \"traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                      \"times\": 3, \"emit\": \"after\", \"max_depth\": 100 } } }, \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"after_three_hops\", \"root\": { \"id\": { \"input\": { \"repeat\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n          \"config\": { \"traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                      \"times\": 3, \"emit\": \"none\", \"max_depth\": 100 } } } } } } }\n    ],\n    \"returns\": [\"reach\", \"after_three_hops\"] } } }",
    response: "{ \"after_three_hops\": [], \"reach\": [ { \"name\": \"Bruno\" }, { \"name\": \"Carla\" } ] }",
  },
  {
    n: 23, title: "repeat ... until", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"stop_at_carla\", \"root\": { \"values\": { \"input\": { \"repeat\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n      \"config\": { \"traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                  \"until\": { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"constant\": { \"string\": \"Carla\" } } } },\n                  \"emit\": \"none\", \"max_depth\": 10 } } }, \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"stop_at_carla\"] } } }",
    response: "{ \"stop_at_carla\": [ { \"name\": \"Carla\" } ] }",
  },
  {
    n: 24, title: "union", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"ana_world\", \"root\": { \"values\": { \"input\": { \"union\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n      \"traversals\": [ { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                      { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } } ] } },\n      \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"ana_world\"] } } }",
    response: "{ \"ana_world\": [ { \"name\": \"Bruno\" }, { \"name\": \"Acme\" } ] }",
  },
  {
    n: 25, title: "coalesce", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"next_stop\", \"root\": { \"values\": { \"input\": { \"coalesce\": {\n      \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n      \"traversals\": [ { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                      { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } } ] } },\n      \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"next_stop\"] } } }",
    response: "{ \"next_stop\": [ { \"name\": \"Bruno\" }, { \"name\": \"Carla\" }, { \"name\": \"Acme\" } ] }",
  },
  {
    n: 26, title: "optional", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"employer_or_self\", \"root\": { \"values\": { \"input\": { \"optional\": {\n      \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n      \"traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } } } },\n      \"properties\": [\"name\"] } } } } ],\n    \"returns\": [\"employer_or_self\"] } } }",
    response: "{ \"employer_or_self\": [ { \"name\": \"Acme\" }, { \"name\": \"Bruno\" }, { \"name\": \"Acme\" } ] }",
  },
  {
    n: 27, title: "choose with and without an else branch", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"with_else\", \"root\": { \"values\": { \"input\": { \"choose\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"condition\": { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Lisbon\" } } } },\n          \"then_traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } },\n          \"else_traversal\": { \"root\": \"context\" } } }, \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"without_else\", \"root\": { \"values\": { \"input\": { \"choose\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } },\n          \"condition\": { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Lisbon\" } } } },\n          \"then_traversal\": { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } } } },\n          \"properties\": [\"name\"] } } } }\n    ],\n    \"returns\": [\"with_else\", \"without_else\"] } } }",
    response: "{ \"with_else\": [ { \"name\": \"Acme\" }, { \"name\": \"Acme\" }, { \"name\": \"Bruno\" } ],\n  \"without_else\": [ { \"name\": \"Acme\" }, { \"name\": \"Acme\" } ] }",
  },
  {
    n: 28, title: "Correlated rows with bind and project_bindings", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"jobs\", \"root\": { \"project_bindings\": {\n      \"input\": { \"bind\": { \"input\": { \"out\": {\n        \"input\": { \"bind\": { \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } }, \"name\": \"person\" } },\n        \"label\": \"WORKS_AT\" } }, \"name\": \"employer\" } },\n      \"distinct\": true,\n      \"projections\": [\n        { \"property\": { \"target\": { \"binding\": \"person\" }, \"source\": \"name\", \"alias\": \"person\" } },\n        { \"property\": { \"target\": { \"binding\": \"employer\" }, \"source\": \"name\", \"alias\": \"employer\" } } ] } } } } ],\n    \"returns\": [\"jobs\"] } } }",
    response: "{ \"jobs\": [ { \"employer\": \"Acme\", \"person\": \"Ana\" }, { \"employer\": \"Acme\", \"person\": \"Carla\" } ] }",
  },
  {
    n: 29, title: "Optional bindings resolved with a binding coalesce", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"anchors\", \"root\": { \"project_bindings\": {\n      \"input\": { \"optional\": {\n        \"input\": { \"bind\": { \"input\": { \"nodes_where\": { \"predicate\": { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } }, \"name\": \"p\" } },\n        \"traversal\": { \"root\": { \"bind\": { \"input\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } }, \"name\": \"job\" } } } } },\n      \"distinct\": false,\n      \"projections\": [\n        { \"property\": { \"target\": { \"binding\": \"p\" }, \"source\": \"name\", \"alias\": \"name\" } },\n        { \"coalesce\": { \"refs\": [ { \"target\": { \"binding\": \"job\" }, \"source\": \"name\" },\n                                  { \"target\": { \"binding\": \"p\" }, \"source\": \"city\" } ], \"alias\": \"anchor\" } } ] } } } } ],\n    \"returns\": [\"anchors\"] } } }",
    response: "{ \"anchors\": [ { \"anchor\": \"Acme\", \"name\": \"Ana\" }, { \"anchor\": \"Porto\", \"name\": \"Bruno\" }, { \"anchor\": \"Acme\", \"name\": \"Carla\" } ] }",
  },
  {
    n: 30, title: "Returning bound rows directly gives annotated rows", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"hop\", \"root\": { \"out\": {\n      \"input\": { \"bind\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"name\": \"start\" } },\n      \"label\": \"KNOWS\" } } } } ],\n    \"returns\": [\"hop\"] } } }",
    response: "{ \"hop\": [ { \"bindings\": { \"start\": { \"node\": 1 } }, \"current\": { \"node\": 2 } } ] }",
  },
  {
    n: 31, title: "path", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"trail\", \"root\": { \"path\": { \"input\": { \"out_n\": {\n      \"input\": { \"out_e\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } }, \"label\": \"KNOWS\" } } } } } } } } ],\n    \"returns\": [\"trail\"] } } }",
    response: "{ \"trail\": [ { \"bindings\": {}, \"current\": { \"node\": 1 }, \"path\": [ { \"node\": 0 }, { \"edge\": 0 }, { \"node\": 1 } ] } ] }",
  },
  {
    n: 32, title: "Sacks", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"tally\", \"root\": { \"sack_get\": { \"input\": { \"sack_add\": {\n      \"input\": { \"out_e\": {\n        \"input\": { \"with_sack\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } }, \"initial\": { \"i64\": 5 } } },\n        \"label\": \"KNOWS\" } },\n      \"property\": \"since\" } } } } } } ],\n    \"returns\": [\"tally\"] } } }",
    response: "{ \"tally\": [ { \"bindings\": {}, \"current\": { \"edge\": 0 }, \"sack\": 2020 } ] }",
  },
  {
    n: 33, title: "fold, batch conditions on a folded value, and a skipped scalar entry", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"crowd\", \"root\": { \"fold\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } } } } } },\n      { \"query\": { \"name\": \"big_crowd\", \"condition\": { \"var_min_size\": [\"crowd\", 2] },\n          \"root\": { \"count\": { \"input\": { \"nodes\": { \"reference\": { \"var\": \"crowd\" } } } } } } },\n      { \"query\": { \"name\": \"crowd_size\", \"root\": { \"count\": { \"input\": { \"nodes\": { \"reference\": { \"var\": \"crowd\" } } } } } } }\n    ],\n    \"returns\": [\"crowd\", \"big_crowd\", \"crowd_size\"] } } }",
    response: "{ \"big_crowd\": [], \"crowd\": [ { \"$id\": 0 }, { \"$id\": 1 }, { \"$id\": 2 } ], \"crowd_size\": 3 }",
  },
  {
    n: 34, title: "shortest_path", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"forward\", \"root\": { \"shortest_path\": {\n          \"source\": { \"ids\": [0] }, \"target\": { \"ids\": [2] }, \"label\": \"KNOWS\", \"direction\": \"out\", \"max_depth\": 4 } } } },\n      { \"query\": { \"name\": \"against_direction\", \"root\": { \"shortest_path\": {\n          \"source\": { \"ids\": [2] }, \"target\": { \"ids\": [0] }, \"direction\": \"out\", \"max_depth\": 4 } } } },\n      { \"query\": { \"name\": \"backwards\", \"root\": { \"shortest_path\": {\n          \"source\": { \"ids\": [2] }, \"target\": { \"param\": \"goal\" }, \"direction\": \"in\", \"max_depth\": 4 } } } },\n      { \"query\": { \"name\": \"too_short\", \"root\": { \"shortest_path\": {\n          \"source\": { \"ids\": [0] }, \"target\": { \"ids\": [2] }, \"direction\": \"both\", \"max_depth\": 1 } } } }\n    ],\n    \"returns\": [\"forward\", \"against_direction\", \"backwards\", \"too_short\"] } },\n  \"parameters\": { \"goal\": 0 } }",
    response: "{ \"against_direction\": [], \"backwards\": [2, 1, 0], \"forward\": [0, 1, 2], \"too_short\": [] }",
  },
  {
    n: 35, title: "prev_not_empty and var_empty", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"faro\", \"root\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"city\" }, \"right\": { \"constant\": { \"string\": \"Faro\" } } } } } } } },\n      { \"query\": { \"name\": \"faro_names\", \"condition\": \"prev_not_empty\", \"root\": { \"values\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"faro\" } } }, \"properties\": [\"name\"] } } } },\n      { \"query\": { \"name\": \"fallback\", \"condition\": { \"var_empty\": \"faro\" }, \"root\": { \"values\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [3] } } }, \"properties\": [\"name\"] } } } }\n    ],\n    \"returns\": [\"faro_names\", \"fallback\"] } } }",
    response: "{ \"fallback\": [ { \"name\": \"Acme\" } ], \"faro_names\": [] }",
  },
  {
    n: 36, title: "Warm read header, and an empty returns", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"all_people\", \"root\": { \"nodes_where\": { \"predicate\":\n      { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } } } } ],\n    \"returns\": [] } } }",
    response: "{}",
  },
  {
    n: 37, title: "Upsert, existing person (update path)", status: 200,
    request: "{\n  \"request_type\": \"write\",\n  \"query_name\": \"upsert_person\",\n  \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"existing\", \"root\": { \"nodes_where\": { \"predicate\": { \"and\": { \"predicates\": [\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } },\n          { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"param\": \"name\" } } } ] } } } } } },\n      { \"query\": { \"name\": \"updated\", \"condition\": { \"var_not_empty\": \"existing\" }, \"root\": { \"set_property\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"existing\" } } },\n          \"name\": \"city\", \"value\": { \"expr\": { \"param\": \"city\" } } } } } },\n      { \"query\": { \"name\": \"created\", \"condition\": { \"var_empty\": \"existing\" }, \"root\": { \"add_n\": {\n          \"label\": \"Person\", \"properties\": [ [\"name\", { \"expr\": { \"param\": \"name\" } }], [\"city\", { \"expr\": { \"param\": \"city\" } }] ] } } } }\n    ],\n    \"returns\": [\"updated\", \"created\"] } },\n  \"parameters\": { \"name\": \"Ana\", \"city\": \"Lisbon\" },\n  \"parameter_types\": { \"name\": \"string\", \"city\": \"string\" }\n}",
    response: "{ \"created\": [], \"updated\": [ { \"$id\": 0 } ] }",
  },
  {
    n: 38, title: "The same upsert, new person (create path)", status: 200,
    request: "{\n  \"request_type\": \"write\",\n  \"query_name\": \"upsert_person\",\n  \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"existing\", \"root\": { \"nodes_where\": { \"predicate\": { \"and\": { \"predicates\": [\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } },\n          { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"param\": \"name\" } } } ] } } } } } },\n      { \"query\": { \"name\": \"updated\", \"condition\": { \"var_not_empty\": \"existing\" }, \"root\": { \"set_property\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"existing\" } } },\n          \"name\": \"city\", \"value\": { \"expr\": { \"param\": \"city\" } } } } } },\n      { \"query\": { \"name\": \"created\", \"condition\": { \"var_empty\": \"existing\" }, \"root\": { \"add_n\": {\n          \"label\": \"Person\", \"properties\": [ [\"name\", { \"expr\": { \"param\": \"name\" } }], [\"city\", { \"expr\": { \"param\": \"city\" } }] ] } } } }\n    ],\n    \"returns\": [\"updated\", \"created\"] } },\n  \"parameters\": { \"name\": \"Dora\", \"city\": \"Faro\" },\n  \"parameter_types\": { \"name\": \"string\", \"city\": \"string\" }\n}",
    response: "{ \"created\": [ { \"$id\": 4 } ], \"updated\": [] }",
  },
  {
    n: 39, title: "Bulk insert with for_each", status: 200,
    request: "{\n  \"request_type\": \"write\",\n  \"query\": { \"write\": {\n    \"entries\": [\n      { \"for_each\": { \"param\": \"rows\", \"body\": [\n        { \"query\": { \"name\": \"added\", \"root\": { \"add_n\": { \"label\": \"Person\", \"properties\": [\n            [\"name\", { \"expr\": { \"param\": \"name\" } }], [\"age\", { \"expr\": { \"param\": \"age\" } }] ] } } } } ] } },\n      { \"query\": { \"name\": \"people_now\", \"root\": { \"count\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } } } } } }\n    ],\n    \"returns\": [\"added\", \"people_now\"] } },\n  \"parameters\": { \"rows\": [ { \"name\": \"Eva\", \"age\": 25 }, { \"name\": \"Filipe\", \"age\": 38 } ] },\n  \"parameter_types\": { \"rows\": { \"array\": \"object\" } }\n}",
    response: "{ \"added\": [ { \"$id\": 6 } ], \"people_now\": 6 }",
  },
  {
    n: 40, title: "Update with an expression, remove a property, wait for durability", status: 200,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"older\", \"root\": { \"set_property\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } },\n          \"name\": \"age\", \"value\": { \"expr\": { \"add\": { \"left\": { \"property\": \"age\" }, \"right\": { \"constant\": { \"i64\": 1 } } } } } } } } },\n      { \"query\": { \"name\": \"no_city\", \"root\": { \"remove_property\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [5] } } }, \"name\": \"city\" } } } },\n      { \"query\": { \"name\": \"bruno_now\", \"root\": { \"value_map\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"properties\": [\"age\"] } } } }\n    ],\n    \"returns\": [\"older\", \"no_city\", \"bruno_now\"] } } }",
    response: "{ \"bruno_now\": [ { \"age\": 42.0 } ], \"no_city\": [ { \"$id\": 5 } ], \"older\": [ { \"$id\": 1 } ] }",
  },
  {
    n: 41, title: "Deleting edges and a node", status: 200,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"unfriend\", \"root\": { \"drop_edge_labeled\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } }, \"to\": { \"ids\": [1] }, \"label\": \"KNOWS\" } } } },\n      { \"query\": { \"name\": \"by_id\", \"root\": { \"drop_edge_by_id\": { \"edges\": { \"ids\": [1] } } } } },\n      { \"query\": { \"name\": \"gone\", \"root\": { \"drop\": { \"input\": { \"nodes\": { \"reference\": { \"ids\": [6] } } } } } } },\n      { \"query\": { \"name\": \"knows_left\", \"root\": { \"count\": { \"input\": { \"edges_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"KNOWS\" } } } } } } } } } },\n      { \"query\": { \"name\": \"people_left\", \"root\": { \"count\": { \"input\": { \"nodes_where\": { \"predicate\":\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Person\" } } } } } } } } } }\n    ],\n    \"returns\": [\"unfriend\", \"by_id\", \"gone\", \"knows_left\", \"people_left\"] } } }",
    response: "{ \"by_id\": [], \"gone\": [], \"knows_left\": 0, \"people_left\": 5, \"unfriend\": [] }",
  },
  {
    n: 42, title: "Attach-if-missing with coalesce and a mutating branch", status: 200,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"acme\", \"root\": { \"nodes_where\": { \"predicate\": { \"and\": { \"predicates\": [\n          { \"eq\": { \"left\": { \"property\": \"$label\" }, \"right\": { \"constant\": { \"string\": \"Company\" } } } },\n          { \"eq\": { \"left\": { \"property\": \"name\" }, \"right\": { \"constant\": { \"string\": \"Acme\" } } } } ] } } } } } },\n      { \"query\": { \"name\": \"employed\", \"root\": { \"coalesce\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [0, 1] } } },\n          \"traversals\": [\n            { \"root\": { \"out\": { \"input\": \"context\", \"label\": \"WORKS_AT\" } } },\n            { \"root\": { \"add_e\": { \"input\": \"context\", \"label\": \"WORKS_AT\", \"to\": { \"var\": \"acme\" }, \"properties\": [] } } } ] } } } },\n      { \"query\": { \"name\": \"staff\", \"root\": { \"count\": { \"input\": { \"in\": {\n          \"input\": { \"nodes\": { \"reference\": { \"var\": \"acme\" } } }, \"label\": \"WORKS_AT\" } } } } } }\n    ],\n    \"returns\": [\"employed\", \"staff\"] } } }",
    response: "{ \"employed\": [ { \"$id\": 3 }, { \"$id\": 4 } ], \"staff\": 3 }",
  },
  {
    n: 55, title: "request_type disagrees with the batch \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"write\": { \"entries\": [], \"returns\": [] } } }",
    response: "{ \"error\": \"invalid_query_json\", \"msg\": \"invalid query JSON: request_type must match the query batch variant\" }",
  },
  {
    n: 56, title: "A mutation inside a read batch \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"sneaky\", \"root\": { \"count\": { \"input\": { \"set_property\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } }, \"name\": \"city\", \"value\": { \"value\": { \"string\": \"Braga\" } } } } } } } } ],\n    \"returns\": [\"sneaky\"] } } }",
    response: "{ \"error\": \"invalid_query_json\", \"msg\": \"invalid query JSON: read batch entry 'entries[0]' contains a persistent mutation\" }",
  },
  {
    n: 57, title: "Typed parameter mismatch \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"n\", \"root\": { \"limit\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"count\": { \"expr\": { \"param\": \"size\" } } } } } } ],\n    \"returns\": [\"n\"] } },\n  \"parameters\": { \"size\": 2.5 }, \"parameter_types\": { \"size\": \"i64\" } }",
    response: "{ \"error\": \"invalid_query_json\", \"msg\": \"invalid query JSON: parameter 'size' expected I64, but received f64\" }",
  },
  {
    n: 58, title: "Declared and supplied parameter names differ \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": { \"entries\": [ { \"query\": { \"name\": \"x\", \"root\": { \"nodes\": { \"reference\": \"all\" } } } } ], \"returns\": [] } },\n  \"parameters\": { \"a\": 1 }, \"parameter_types\": { \"b\": \"i64\" } }",
    response: "{ \"error\": \"invalid_query_json\", \"msg\": \"invalid query JSON: parameter schema names do not match values (missing values: [\\\"b\\\"], extra values: [\\\"a\\\"])\" }",
  },
  {
    n: 59, title: "context at the top level \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"lost\", \"root\": { \"out\": { \"input\": \"context\" } } } } ], \"returns\": [\"lost\"] } } }",
    response: "{ \"error\": \"unbound_context\", \"msg\": \"planner error: sub-traversal context cannot be planned without parent input\" }",
  },
  {
    n: 60, title: "A source inside a branch \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"bad\", \"root\": { \"optional\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n      \"traversal\": { \"root\": { \"nodes\": { \"reference\": { \"ids\": [1] } } } } } } } } ], \"returns\": [\"bad\"] } } }",
    response: "{ \"error\": \"invalid_sub_traversal_operation\", \"msg\": \"planner error: source is not supported inside branch/repeat sub-traversals\" }",
  },
  {
    n: 61, title: "union with one branch \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"solo\", \"root\": { \"union\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n      \"traversals\": [ { \"root\": { \"out\": { \"input\": \"context\" } } } ] } } } } ], \"returns\": [\"solo\"] } } }",
    response: "{ \"error\": \"invalid_branch_arity\", \"msg\": \"planner error: union branch requires at least 2 traversal(s), got 1\" }",
  },
  {
    n: 62, title: "Returning a name no entry binds \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"a\", \"root\": { \"as\": { \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"name\": \"b\" } } } } ],\n    \"returns\": [\"b\"] } } }",
    response: "{ \"error\": \"internal_planner_error\", \"msg\": \"planner error: invalid executable plan: return variable `b` has no executable binding\" }",
  },
  {
    n: 63, title: "Inverted literal range \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"r\", \"root\": { \"range\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"start\": { \"literal\": 5 }, \"end\": { \"literal\": 2 } } } } } ], \"returns\": [\"r\"] } } }",
    response: "{ \"error\": \"invalid_stream_range\", \"msg\": \"planner error: stream range start must not exceed end, got 5..2\" }",
  },
  {
    n: 64, title: "Negative constant bound \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"l\", \"root\": { \"limit\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"count\": { \"expr\": { \"constant\": { \"i64\": -1 } } } } } } } ], \"returns\": [\"l\"] } } }",
    response: "{ \"error\": \"invalid_stream_bound_expression\", \"msg\": \"planner error: stream bound must be non-negative integer\" }",
  },
  {
    n: 65, title: "order_by after bind \u2014 400", status: 400,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"o\", \"root\": { \"order_by\": {\n      \"input\": { \"bind\": { \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"name\": \"x\" } },\n      \"property\": \"name\", \"order\": \"asc\" } } } } ], \"returns\": [\"o\"] } } }",
    response: "{ \"error\": \"invalid_after_bind_operation\", \"msg\": \"planner error: order_by is not supported after bind\" }",
  },
  {
    n: 66, title: "bind in a write batch \u2014 400", status: 400,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [ { \"query\": { \"name\": \"w\", \"root\": { \"count\": { \"input\": { \"bind\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"name\": \"x\" } } } } } } ], \"returns\": [\"w\"] } } }",
    response: "{ \"error\": \"read_only_traversal_in_write_batch\", \"msg\": \"planner error: bind is read-only and cannot be used in write batches\" }",
  },
  {
    n: 67, title: "Parameter missing at run time \u2014 500", status: 500,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [ { \"query\": { \"name\": \"p\", \"root\": { \"where\": {\n      \"input\": { \"nodes\": { \"reference\": \"all\" } },\n      \"predicate\": { \"gt\": { \"left\": { \"property\": \"age\" }, \"right\": { \"add\": { \"left\": { \"param\": \"base\" }, \"right\": { \"constant\": { \"i64\": 1 } } } } } } } } } } ],\n    \"returns\": [\"p\"] } } }",
    response: "{ \"error\": \"invalid_query\", \"msg\": \"db error: Query error: parameter `base` is not bound\" }",
  },
  {
    n: 68, title: "Edge to a node that does not exist \u2014 500", status: 500,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [ { \"query\": { \"name\": \"e\", \"root\": { \"add_e\": {\n      \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } }, \"label\": \"KNOWS\", \"to\": { \"ids\": [404] }, \"properties\": [] } } } } ],\n    \"returns\": [\"e\"] } } }",
    response: "{ \"error\": \"node_not_found\", \"msg\": \"db error: Node not found: 404\" }",
  },
  {
    n: 74, title: "Stored variables: store, without, within, select", status: 200,
    request: "{ \"request_type\": \"read\", \"query_name\": \"friends_of_friends\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"me\", \"root\": { \"nodes\": { \"reference\": { \"ids\": [0] } } } } },\n      { \"query\": { \"name\": \"fof\", \"root\": { \"id\": { \"input\": { \"without\": {\n          \"input\": { \"store\": {\n            \"input\": { \"both\": {\n              \"input\": { \"store\": {\n                \"input\": { \"both\": { \"input\": { \"nodes\": { \"reference\": { \"var\": \"me\" } } }, \"label\": \"KNOWS\" } },\n                \"name\": \"direct\" } },\n              \"label\": \"KNOWS\" } },\n            \"name\": \"reach\" } },\n          \"variable\": \"me\" } } } } } },\n      { \"query\": { \"name\": \"reach_people\", \"root\": { \"id\": { \"input\": { \"within\": {\n          \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"variable\": \"reach\" } } } } } },\n      { \"query\": { \"name\": \"direct_count\", \"root\": { \"count\": { \"input\": { \"select\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [3] } } }, \"name\": \"direct\" } } } } } }\n    ],\n    \"returns\": [\"fof\", \"reach_people\", \"direct_count\"] } } }",
    response: "{ \"direct_count\": 1, \"fof\": [2], \"reach_people\": [0, 2] }",
  },
  {
    n: 75, title: "inject (both forms), has_label and skip", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"lisboetas\", \"root\": { \"has\": {\n          \"input\": { \"nodes_where\": { \"predicate\": { \"has_key\": { \"property\": \"city\" } } } },\n          \"property\": \"city\", \"value\": { \"string\": \"Lisbon\" } } } } },\n      { \"query\": { \"name\": \"plus_company\", \"root\": { \"label\": { \"input\": { \"inject\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [3] } } }, \"variable\": \"lisboetas\" } } } } } },\n      { \"query\": { \"name\": \"again\", \"root\": { \"id\": { \"input\": { \"inject\": { \"variable\": \"lisboetas\" } } } } } },\n      { \"query\": { \"name\": \"people_after_first\", \"root\": { \"id\": { \"input\": { \"skip\": {\n          \"input\": { \"has_label\": { \"input\": { \"nodes\": { \"reference\": \"all\" } }, \"label\": \"Person\" } },\n          \"count\": { \"literal\": 1 } } } } } } }\n    ],\n    \"returns\": [\"plus_company\", \"again\", \"people_after_first\"] } } }",
    response: "{ \"again\": [0, 2], \"people_after_first\": [1, 2], \"plus_company\": [\"Company\", \"Person\", \"Person\"] }",
  },
  {
    n: 76, title: "Edge-centric navigation: both_e, in_e, other_n, in_n, edge_has_label", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"bruno_edges\", \"root\": { \"id\": { \"input\": { \"both_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } } } } } } } },\n      { \"query\": { \"name\": \"met_bruno_since\", \"root\": { \"values\": { \"input\": { \"in_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"label\": \"KNOWS\" } }, \"properties\": [\"since\"] } } } },\n      { \"query\": { \"name\": \"across\", \"root\": { \"id\": { \"input\": { \"other_n\": { \"input\": { \"both_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } } } } } } } } } },\n      { \"query\": { \"name\": \"ends_of_edge0\", \"root\": { \"id\": { \"input\": { \"other_n\": {\n          \"input\": { \"edges\": { \"reference\": { \"ids\": [0] } } } } } } } } },\n      { \"query\": { \"name\": \"employers_of\", \"root\": { \"id\": { \"input\": { \"in_n\": { \"input\": { \"edge_has_label\": {\n          \"input\": { \"edges\": { \"reference\": \"all\" } }, \"label\": \"WORKS_AT\" } } } } } } } }\n    ],\n    \"returns\": [\"bruno_edges\", \"met_bruno_since\", \"across\", \"ends_of_edge0\", \"employers_of\"] } } }",
    response: "{ \"across\": [0, 2], \"bruno_edges\": [0, 1], \"employers_of\": [0, 2], \"ends_of_edge0\": [0, 1],\n  \"met_bruno_since\": [ { \"since\": 2015 } ] }",
  },
  {
    n: 77, title: "simple_path, fold + unfold, and sack_set", status: 200,
    request: "{ \"request_type\": \"read\", \"query\": { \"read\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"loop_free\", \"root\": { \"id\": { \"input\": { \"simple_path\": { \"input\": { \"repeat\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [0] } } },\n          \"config\": { \"traversal\": { \"root\": { \"both\": { \"input\": \"context\", \"label\": \"KNOWS\" } } },\n                      \"times\": 2, \"emit\": \"none\", \"max_depth\": 100 } } } } } } } } },\n      { \"query\": { \"name\": \"refolded\", \"root\": { \"id\": { \"input\": { \"has\": {\n          \"input\": { \"unfold\": { \"input\": { \"fold\": { \"input\": { \"nodes_where\": { \"predicate\":\n            { \"has_key\": { \"property\": \"city\" } } } } } } } },\n          \"property\": \"city\", \"value\": { \"string\": \"Lisbon\" } } } } } } },\n      { \"query\": { \"name\": \"age_sacks\", \"root\": { \"sack_get\": { \"input\": { \"sack_set\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [2, 3] } } }, \"property\": \"age\" } } } } } }\n    ],\n    \"returns\": [\"loop_free\", \"refolded\", \"age_sacks\"] } } }",
    response: "{ \"age_sacks\": [ { \"bindings\": {}, \"current\": { \"node\": 2 }, \"sack\": 29 },\n                 { \"bindings\": {}, \"current\": { \"node\": 3 }, \"sack\": null } ],\n  \"loop_free\": [2],\n  \"refolded\": [0, 2] }",
  },
  {
    n: 78, title: "Removing one edge between two nodes with drop_edge", status: 200,
    request: "{ \"request_type\": \"write\", \"query\": { \"write\": {\n    \"entries\": [\n      { \"query\": { \"name\": \"unfriend\", \"root\": { \"drop_edge\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } }, \"to\": { \"ids\": [2] } } } } },\n      { \"query\": { \"name\": \"bruno_out\", \"root\": { \"count\": { \"input\": { \"out\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } } } } } } } },\n      { \"query\": { \"name\": \"bruno_edges\", \"root\": { \"id\": { \"input\": { \"both_e\": {\n          \"input\": { \"nodes\": { \"reference\": { \"ids\": [1] } } } } } } } } }\n    ],\n    \"returns\": [\"unfriend\", \"bruno_out\", \"bruno_edges\"] } } }",
    response: "{ \"bruno_edges\": [0], \"bruno_out\": 0, \"unfriend\": [] }",
  },
];
