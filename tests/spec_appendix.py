"""The partitioning spec's Appendix A: the `__manifest` table metadata of a partitioned namespace
(two partition specs and the JSON Arrow schema), exactly as the spec prints it."""

APPENDIX_A = {
    "partition_spec_v1": {
        "id": 1,
        "fields": [
            {
                "field_id": "event_date",
                "source_ids": [1],
                "transform": {"type": "identity"},
                "result_type": {"type": "date32"},
            }
        ],
    },
    "partition_spec_v2": {
        "id": 2,
        "fields": [
            {
                "field_id": "event_year",
                "source_ids": [1],
                "transform": {"type": "year"},
                "result_type": {"type": "int32"},
            },
            {
                "field_id": "country",
                "source_ids": [2],
                "transform": {"type": "identity"},
                "result_type": {"type": "utf8"},
            },
        ],
    },
    "schema": {
        "fields": [
            {
                "name": "id",
                "nullable": False,
                "type": {"type": "int64"},
                "metadata": {"lance:field_id": "0"},
            },
            {
                "name": "event_date",
                "nullable": True,
                "type": {"type": "date32"},
                "metadata": {"lance:field_id": "1"},
            },
            {
                "name": "country",
                "nullable": True,
                "type": {"type": "utf8"},
                "metadata": {"lance:field_id": "2"},
            },
        ]
    },
}
