"""The data model: the record layout shared with the C recorder, its dtype and bound codes, the op table's entries, the
document schema and the collectives' vocabulary. Data only."""
