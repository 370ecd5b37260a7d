"""The lease layer: values, schema, the store and one statements module per backend."""
