-- The hand-made staging table's side of the single-job staging cost: the same payload into a table
-- with only a primary key (bench.pk_jobs), what an application's own outbox table usually is.
INSERT INTO bench.pk_jobs (queue, payload) VALUES ('bench_stage', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}') RETURNING id;
