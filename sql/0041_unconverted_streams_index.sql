-- The subscriber streams still to convert to pseudonyms
-- (PlainStreamConversion), which every instance asks for as it prepares the
-- database: normally none. Without an index the question read every stream
-- and matched each against the converted pattern (440 ms for 100,000
-- streams, so minutes for tens of millions, at every start). This partial
-- index holds only the streams that do not match, so it stays empty and the
-- question reads nothing. Its predicate is the question's, word for word
-- (PostgreSQL uses a partial index only when it can prove the query's
-- condition implies the index's); a test checks the plan.
CREATE INDEX IF NOT EXISTS streams_unconverted ON streams (stream_id)
    WHERE starts_with(stream_id, 'subscriber-') AND stream_id !~ '^subscriber-ps-[0-9a-f]{32}$';
