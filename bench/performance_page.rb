# Writes docs/performance.md from one `make bench` results file (bench/run.sh writes it at the end
# of a run with every default phase, or with BENCH_DOCS=1): the run's date, machine, servers and
# settings, then bench/report.rb's rows as one Markdown table per phase. Every figure on the page
# comes from the results file; the prose here says only what each phase compares.
#
#   ruby bench/performance_page.rb RESULTS_FILE [OUT]     OUT defaults to docs/performance.md
results, out = ARGV[0], ARGV[1] || File.join(__dir__, "..", "docs", "performance.md")
abort "usage: ruby bench/performance_page.rb RESULTS_FILE [OUT]" unless results && File.file?(results)

run = {}
File.foreach(results) do |l|
  k, v = l.chomp.split("=", 2)
  run[k] = v if k && v && (k.start_with?("run_") || %w[server_versions base_release].include?(k))
end
rows = IO.popen(["ruby", File.join(__dir__, "report.rb"), results, "--rows"], &:read)
abort "bench/report.rb failed on #{results}" unless $?.success?
rows = rows.lines.map { |l| l.chomp.split("\t", -1) }

# Each phase: its title and what its rows compare (what a user would use instead), in run order.
PHASES = {
  "baseline" => ["This build against the previous release",
                 "Release #{run["base_release"] || "1.2"} is built from git history and installed in turn with this build, " \
                 "in the same run, interleaved (this build, 1.2, then 1.2, this build, ...), each after a " \
                 "restart of Postgres and a fresh `CREATE EXTENSION` (`VERSION '1.2'` for 1.2): the same list " \
                 "drain and commit → Redis probes as the drain and latency phases, against a Redis with " \
                 "`maxmemory` set. The `jobbuf` column is this build, `value` is 1.2; throughputs and " \
                 "latencies are each build's best round, every round is on the row below."],
  "drain" => ["Drain throughput",
              "Jobs staged while the worker is paused, then timed from enabling it until Redis holds them " \
              "all. Compared with the fastest SQL `DELETE ... RETURNING` of a batch alone (nothing sent " \
              "anywhere), with Redis's own ingest (`redis-benchmark`, `LPUSH` of 100 values) and with an " \
              "external Ruby enqueuer, the loop an application writes itself (ruby-pg and redis-rb). The " \
              "\"worker's SQL path\" rows are how a table whose owner added triggers, rules or row security " \
              "drains ([worker.md](worker.md))."],
  "staging" => ["Staging cost",
                "`jobbuf_stage` inside a transaction (pgbench, 8 clients, the worker draining on the same " \
                "cores) against a plain `INSERT` into a table of the same shape without trigger. The ratio is " \
                "the cost: plain tps / jobbuf tps."],
  "latency" => ["Commit to Redis",
                "The time from `COMMIT` returning to `BLPOP` returning the job, one single-job transaction " \
                "every 2 ms, on an idle server and under background single-job staging into another queue."],
  "sustain" => ["Sustained load",
                "A steady rate of 100-job transactions while the worker drains, sampled every 5 s: table size, " \
                "dead tuples, the worker's memory and latency, first half of the run against the second; then " \
                "the same with a transaction held open all along."],
  "snapshot" => ["Held snapshot",
                 "Single-job staging at a steady rate, without and then with a `REPEATABLE READ` snapshot held " \
                 "([storage.md](storage.md))."],
  "snapshot_capped" => ["Held snapshot beside a capped backlog",
                        "The held-snapshot loads again while a list queue's `max_in_redis` holds 100,000 jobs " \
                        "back (staged, no consumer), without and then with the snapshot, and beside the " \
                        "held-snapshot phase's figures for the same load ([storage.md](storage.md), " \
                        "[flow.md](flow.md))."],
  "activejob" => ["ActiveJob",
                  "`perform_later` in a transaction through the jobbuf gem's `:jobbuf` adapter, against " \
                  "ActiveJob's own Sidekiq adapter."],
  "redisprod" => ["Production Redis",
                  "The drain over TLS against plain TCP, and with `jobbuf.redis_min_replicas = 1` against 0, " \
                  "the same replica attached."],
  "cluster" => ["Redis Cluster", "Six list queues drained into a 3-master Redis Cluster against the same into one Redis."],
  "frameworks" => ["Frameworks",
                   "Jobs drained into BullMQ and Celery against those frameworks' own producers " \
                   "(`Queue.addBulk` from Node, an `apply_async` loop from Python)."],
  "databases" => ["Several databases",
                  "One drain worker per database: two databases draining at once against one, and the " \
                  "commit → Redis latency with many databases having the extension."],
  "clients" => ["Clients",
                "A transaction inserting a row and enqueuing, one process, through jobbuf's clients against " \
                "the framework's own producer (which pushes to Redis inside the transaction)."],
  "scrape" => ["Metrics scrape",
               "What one metrics scrape costs with a backlog: 1.1's `jobbuf_stats()` (counts the jobs) against " \
               "today's (reads the worker's census), and the worker's pauses for its census " \
               "([operations.md](operations.md))."],
  "queues" => ["Many queues", "The idle worker's CPU and the commit → Redis latency with many queues against few."],
  "schedules" => ["Periodic jobs", "The idle worker's CPU and the commit → Redis latency with many schedules, none due, against none."],
}.freeze

cell = ->(v) { v.to_s.strip.empty? ? "-" : v.to_s.gsub("|", "\\|") }
wrap = ->(text) { text.gsub(/(.{1,100})(?: +|\z)/, "\\1\n").chomp }  # prose at 100 columns, as the other pages
figure = ->(f) { f.start_with?(" ") ? "↳ #{f.strip}" : f }

page = []
page << "# Performance"
page << ""
page << "<!-- Written by bench/run.sh (bench/performance_page.rb) from one make bench run: edit that script, not this page. -->"
page << ""
page << wrap.("Every figure below comes from one `make bench` run (method: [bench/README.md](../bench/README.md)), " \
             "jobbuf side by side with what a user would use instead, on this machine:")
page << ""
page << "| run | |"
page << "|---|---|"
page << "| date (UTC) | #{cell.(run["run_started"])} to #{cell.(run["run_ended"])} |"
page << "| machine | #{cell.(run["run_cpus"])} CPUs (#{cell.(run["run_cpu_model"])}), #{cell.(run["run_ram"])} RAM |"
page << "| system | #{cell.(run["run_kernel"])}, #{cell.(run["run_os"])} |"
page << "| load average (1, 5, 15 min) | #{cell.(run["run_load_start"])} at the start, #{cell.(run["run_load_end"])} at the end |"
page << "| servers | #{cell.(run["server_versions"])} |"
page << "| phases | #{cell.(run["run_phases"])} |"
page << "| settings | #{cell.(run["run_settings"]).gsub("; ", ", ")} (the others at their defaults: bench/run.sh) |"
page << ""
page << wrap.("In each table `ratio` is the two figures' ratio as the `target` is phrased (jobbuf/comparison for " \
        "a throughput, plain/jobbuf for the staging cost, measured/target for a latency limit), and `met` " \
        "says whether this run met the target (`-`: informational). Throughputs are the best of the " \
        "rounds: other load on the machine only ever lowers a throughput. Figures measured on a shared " \
        "machine move between runs; ratios taken in the same run move less.")

by_phase = rows.group_by { |r| r[7].to_s }
order = PHASES.keys + (by_phase.keys - PHASES.keys)
order.each do |name|
  next unless by_phase[name]
  title, about = PHASES[name] || [name, nil]
  page << ""
  page << "## #{title} (`#{name}`)"
  page << ""
  page << wrap.(about) << "" if about
  page << "| figure | jobbuf | compared with | value | ratio | target | met |"
  page << "|---|---:|---|---:|---:|---|---|"
  by_phase[name].each do |f, jobbuf, cmp_name, cmp, ratio, target, met|
    page << "| #{[figure.(f), jobbuf, cmp_name, cmp, ratio, target, met].map(&cell).join(" | ")} |"
  end
end

phases = run["run_phases"].to_s.split
silent = phases - by_phase.keys
unless silent.empty?
  page << ""
  page << wrap.("Phases of this run with no row in the tables: #{silent.join(", ")}" \
                "#{silent.include?("profile") ? " (profile prints a perf profile, not a figure)" : ""}.")
end
page << ""
page << "## Regenerating this page"
page << ""
page << wrap.("`make bench` rewrites this page at the end of a run of every default phase (or of any subset " \
        "with `BENCH_DOCS=1`; `BENCH_DOCS=0` never), from the run's results file; " \
        "`ruby bench/performance_page.rb RESULTS_FILE` writes it from a results file kept with " \
        "`BENCH_RESULTS=FILE`.")
page << ""
page << "<!-- not runnable: a full benchmark run, long, and it rewrites this page -->"
page << "```sh"
page << "make bench"
page << "```"
File.write(out, page.join("\n") + "\n")
