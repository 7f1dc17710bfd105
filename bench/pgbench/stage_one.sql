-- jobbuf side of the single-job staging cost: one job per transaction, as an application writes it.
-- The payload is a jsonb literal, as in the plain INSERT it is compared with (both are parsed once,
-- when pgbench prepares the statement; an application binding the payload parses it either way).
SELECT jobbuf_stage('bench_stage', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}'::jsonb);
