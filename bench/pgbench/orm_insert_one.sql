-- Decomposition of the staging cost: the ORM path, a plain INSERT into jobbuf.jobs (the staging
-- trigger validates and marks the transaction for the commit wake-up; no jobbuf_stage wrapper).
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('bench_stage', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}') RETURNING id;
