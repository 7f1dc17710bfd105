-- jobbuf side of the single-job staging cost: one job per transaction, as an application writes it.
SELECT jobbuf_stage('bench_stage', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}');
