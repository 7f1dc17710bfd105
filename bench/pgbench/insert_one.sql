-- Plain side of the single-job staging cost: the same payload into a table of the same shape.
INSERT INTO bench.plain_jobs (queue, payload) VALUES ('bench_stage', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}') RETURNING id;
