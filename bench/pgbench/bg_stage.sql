-- Background staging load (run with pgbench --rate) for the latency figures.
SELECT jobbuf_stage('bench_bg', '{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}');
