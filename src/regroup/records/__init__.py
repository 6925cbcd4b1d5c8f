"""The coordinator's records: the single source of truth. Handlers build them, ``replay`` applies them,
the record log stores them and the lab reads them."""
