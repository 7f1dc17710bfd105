# Prints the benchmark summary table from the key=value results file written by bench/run.sh.
# One row per figure: jobbuf's value, the comparison and its value, their ratio, the issue's
# target and whether it is met. Figures whose phase did not run are left out.
#
#   ruby bench/report.rb RESULTS_FILE "settings line"
#   ruby bench/report.rb RESULTS_FILE --rows     the same rows, tab-separated, each followed by
#                                                the phase it comes from (bench/majors_report.rb,
#                                                bench/performance_page.rb)
# A key written more than once (rounds of the drain and staging measurements) keeps its best
# value: interference from other load on the machine only ever lowers a throughput.
r = {}
all = Hash.new { |h, k| h[k] = [] }  # every value of a key, in the order written (the baseline's rounds)
File.foreach(ARGV[0]) do |l|
  k, v = l.chomp.split("=", 2)
  next unless k && v
  all[k] << v
  r[k] = r.key?(k) && k =~ /^(drain|stage)_/ && k !~ /_n$/ ? [r[k].to_f, v.to_f].max.to_s : v
end
settings = ARGV[1] || ""

def num(v) = v.nil? || v == "" ? nil : Float(v)

def fmt(v, digits = nil)
  return "-" if v.nil?
  return v if v.is_a?(String)
  return format("%.#{digits}f", v) if digits
  v >= 100 ? v.round.to_s.reverse.scan(/\d{1,3}/).join(",").reverse : format("%.2f", v)
end

rows = []
phase = nil  # the make bench phase of the rows added next
add = lambda do |figure, jobbuf, cmp_name, cmp, ratio, target, met|
  rows << [figure, fmt(jobbuf), cmp_name, fmt(cmp), ratio ? format("%.2f", ratio) : "-", target,
           met.nil? ? "-" : (met ? "yes" : "NO"), phase]
end

# The baseline phase: this build and release 1.2 installed in turn in the same run (bench/run.sh).
# Throughputs: the best round, as everywhere. Latency: the best (lowest) round as well, for the
# same reason: other load on the machine only ever adds latency, and both builds ran the same
# number of rounds, interleaved; every round's figure is shown on the row below.
if num(r["base_drain_list_cur"]) && num(r["base_drain_list_12"])
  phase = "baseline"
  vals = ->(k) { all[k].map { |v| num(v) }.compact }
  rounds = ->(k) { vals.(k).map { |v| fmt(v) }.join(" / ") }
  c, o = vals.("base_drain_list_cur").max, vals.("base_drain_list_12").max
  add.("drain list vs 1.2 (jobs/s)", c, "1.2, same run", o, c / o, "cur/1.2 >= 0.95 (no worse than 1.2)", c / o >= 0.95)
  add.("  drain list, each round", rounds.("base_drain_list_cur"), "1.2, each round", rounds.("base_drain_list_12"), nil, "(info)", nil)
  [["idle", "latency idle"], ["5000", "latency @5000/s"]].each do |load, label|
    %w[p50 p99].each do |q|
      c, o = vals.("base_lat_#{load}_#{q}_cur").min, vals.("base_lat_#{load}_#{q}_12").min
      next unless c && o
      ratio = o > 0 ? c / o : nil
      if q == "p99"
        # Sub-millisecond p99s move by more than 5 % between rounds of one build on a shared
        # machine: within 0.25 ms of 1.2 counts as no worse too.
        add.("#{label} #{q} vs 1.2 (ms)", c, "1.2, same run", o, ratio, "cur <= 1.05 x 1.2 or + 0.25 ms (no worse than 1.2)",
             ratio && (ratio <= 1.05 || c - o <= 0.25))
        add.("  #{label} #{q}, each round", rounds.("base_lat_#{load}_#{q}_cur"), "1.2, each round", rounds.("base_lat_#{load}_#{q}_12"), nil, "(info)", nil)
      else
        add.("#{label} #{q} vs 1.2 (ms)", c, "1.2, same run", o, ratio, "(info)", nil)
      end
    end
  end
  mm = num(r["base_redis_maxmemory"])
  add.("Redis maxmemory in this phase", "#{fmt(mm)} bytes, #{r["base_redis_policy"]}", "", nil, nil, "(the condition, info)", nil) if mm
end

phase = "drain"
%w[list sidekiq].each do |t|
  j = num(r["drain_#{t}_jobbuf"])
  next unless j
  c, e = num(r["drain_#{t}_ceiling"]), num(r["drain_#{t}_external"])
  add.("drain #{t} (jobs/s)", j, "SQL-only DELETE..RETURNING", c, j / c, "jobbuf/ceiling >= 0.90", j / c >= 0.90)
  if t == "list" && (ri = num(r["drain_list_redis_ingest"]))
    add.("  same against Redis's own ingest", j, "redis-benchmark LPUSH x100", ri, j / ri, "jobbuf/redis >= 0.50 (goal)", j / ri >= 0.50)
  end
  add.("drain #{t} (jobs/s)", j, "external Ruby enqueuer", e, j / e, "jobbuf/external >= 2.5", j / e >= 2.5)
  sq = num(r["drain_#{t}_sql"])
  add.("  same, worker's SQL path", sq, "SQL-only DELETE..RETURNING", c, sq / c, "(owner-changed table, info)", nil) if sq
  st = num(r["drain_#{t}_stale"])
  add.("  SQL path, plan from empty table", st, "SQL-only DELETE..RETURNING", c, st / c, "(#{r["drain_#{t}_stale_n"]} jobs, info)", nil) if st
end
phase = "redisprod"
if (t = num(r["drain_tls"])) && (p = num(r["drain_plain"]))
  add.("drain list over TLS (jobs/s)", t, "same run, plain TCP", p, t / p, "tls/plain >= 0.80", t / p >= 0.80)
end
if (w = num(r["drain_replicas_1"])) && (z = num(r["drain_replicas_0"]))
  add.("drain list, min_replicas=1 (jobs/s)", w, "min_replicas=0, replica attached", z, w / z, "(WAIT per batch, info)", nil)
end
phase = "cluster"
if (c = num(r["drain_cluster_cluster"])) && (o = num(r["drain_cluster_single"]))
  add.("drain 6 list queues, 3-master Redis Cluster (jobs/s)", c, "same queues, one Redis", o, c / o, "cluster/single >= 1.0 (goal, info)", nil)
end
phase = "staging"
[["one", "stage 1 job/tx (tps)", "plain INSERT", 1.15], ["batch", "stage 100 jobs/tx (tps)", "multi-row INSERT of 100", 1.20]].each do |form, label, cmp, limit|
  j, p = num(r["stage_#{form}_jobbuf"]), num(r["stage_#{form}_plain"])
  next unless j
  add.(label, j, cmp, p, p / j, "cost plain/jobbuf <= #{limit}", p / j <= limit)
  k = num(r["stage_#{form}_pk"])
  add.("  same against a table with only a primary key", j, "INSERT, primary key only", k, k / j, "cost <= 1.05 (fsync on)", k / j <= 1.05) if k
  o = num(r["stage_#{form}_orm"])
  add.("  same via INSERT INTO jobbuf.jobs", o, cmp, p, p / o, "(decomposition, info)", nil) if o
  w = num(r["stage_#{form}_paused"])
  add.("  same, worker paused (no drain)", w, cmp, p, p / w, "(decomposition, info)", nil) if w
end
phase = "databases"
if num(r["db_drain_one"])
  one, two = num(r["db_drain_one"]), num(r["db_drain_two"])
  add.("drain, two databases at once (jobs/s)", two, "one database", one, two / one, "(every database, info)", nil)
  add.("wake-up latency, #{r["db_lat_count"]} databases p50 (ms)", num(r["db_lat_p50"]), "", nil, nil, "(info)", nil)
  add.("wake-up latency, #{r["db_lat_count"]} databases p99 (ms)", num(r["db_lat_p99"]), "", nil, nil, "(info)", nil)
end
phase = "scrape"
if (b = num(r["scrape_before_ms"])) && (a = num(r["scrape_after_ms"]))
  jobs = fmt(num(r["scrape_jobs"]))
  add.("scrape: jobbuf_stats(), #{jobs} jobs waiting (ms)", a, "1.1 jobbuf_stats (counts jobs)", b, b / a, "O(queues): faster", a < b)
  pm = num(r["scrape_prom_ms"])
  add.("  exporter's queries (queues + worker) (ms)", pm, "1.1 jobbuf_stats (counts jobs)", b, b / pm, "(info)", nil) if pm
  add.("  the census in one statement (ms)", num(r["scrape_census_ms"]), "1.1 jobbuf_stats (counts jobs)", b, nil, "(info)", nil)
  if (st = num(r["scrape_step_ms"])) && (c = num(r["scrape_census_ms"]))
    add.("  the worker's longest census step (ms, census every #{r["scrape_census_every_s"]} s)", st, "the census in one step", c, c / st, "<= 20 ms", st <= 20)
    lm = num(r["scrape_lat_max"])
    add.("  a live queue's latency p99 meanwhile (ms)", num(r["scrape_lat_p99"]), "", nil, nil, "(info)", nil) if num(r["scrape_lat_p99"])
    add.("  a live queue's latency max meanwhile (ms, #{r["scrape_lat_over20"]} samples over 20 ms)", lm, "the census in one step", c, c / lm, "(info)", nil) if lm
  end
end
phase = "latency"
if num(r["lat_idle_p50"])
  add.("latency idle p50 (ms)", num(r["lat_idle_p50"]), "target", 1.0, num(r["lat_idle_p50"]) / 1.0, "<= 1 ms", num(r["lat_idle_p50"]) <= 1.0)
  add.("latency idle p99 (ms)", num(r["lat_idle_p99"]), "target", 5.0, num(r["lat_idle_p99"]) / 5.0, "<= 5 ms", num(r["lat_idle_p99"]) <= 5.0)
  add.("latency idle max (ms)", num(r["lat_idle_max"]), "", nil, nil, "", nil)
  [2000, 5000].each do |rate|
    next unless num(r["lat_#{rate}_p50"])
    tps = r["lat_#{rate}_tps"]
    add.("latency @#{rate}/s p50 (ms)", num(r["lat_#{rate}_p50"]), "(bg achieved #{tps}/s)", nil, nil, "", nil)
    if rate == 5000
      add.("latency @#{rate}/s p99 (ms)", num(r["lat_#{rate}_p99"]), "target", 20.0, num(r["lat_#{rate}_p99"]) / 20.0, "<= 20 ms", num(r["lat_#{rate}_p99"]) <= 20.0)
    else
      add.("latency @#{rate}/s p99 (ms)", num(r["lat_#{rate}_p99"]), "", nil, nil, "", nil)
    end
    add.("latency @#{rate}/s max (ms)", num(r["lat_#{rate}_max"]), "", nil, nil, "", nil)
  end
end
# Held snapshot (docs/storage.md): the same single-job load without and with a snapshot held.
# One held-snapshot run against the same load without a snapshot (n, h: their result prefixes):
# the latency and size goals, then what both phases print. Returns the held run's p99 and size (kB).
snapshot_rows = lambda do |tag, n, h|
  np99, hp99 = num(r["#{n}_p99"]), num(r["#{h}_p99"])
  add.("#{tag}: p50 / p99 (ms)", "#{fmt(num(r["#{h}_p50"]))} / #{fmt(hp99)}", "no snapshot", "#{fmt(num(r["#{n}_p50"]))} / #{fmt(np99)}",
       np99 > 0 ? hp99 / np99 : nil, "p99 within 2x", np99 > 0 ? hp99 <= 2 * np99 : nil)
  add.("#{tag}: max latency (ms)", num(r["#{h}_max"]), "no snapshot", num(r["#{n}_max"]), nil, "< 100 ms", num(r["#{h}_max"]) < 100)
  hb, nb = num(r["#{h}_max_bytes"]) / 1024, num(r["#{n}_max_bytes"]) / 1024
  add.("#{tag}: largest jobbuf.jobs (kB)", hb, "no snapshot", nb, nb > 0 ? hb / nb : nil, "within 4x", nb > 0 ? hb <= 4 * nb : nil)
  if num(r["#{h}_end_bytes"])
    add.("#{tag}: jobbuf.jobs at the end (kB)", num(r["#{h}_end_bytes"]) / 1024, "no snapshot", num(r["#{n}_end_bytes"]) / 1024, nil, "(info)", nil)
  end
  add.("#{tag}: most dead tuples", num(r["#{h}_max_dead"]), "no snapshot", num(r["#{n}_max_dead"]), nil, "(info)", nil)
  add.("#{tag}: rotations", r["#{h}_rotations"].to_s, "no snapshot", r["#{n}_rotations"].to_s, nil, "(info)", nil)
  add.("#{tag}: catch-up after release (ms)", r["#{h}_catchup_ms"].to_s, "no snapshot", r["#{n}_catchup_ms"].to_s, nil, "(info)", nil)
  [hp99, hb]
end
phase = "snapshot"
(1..9).each do |k|
  next unless num(r["snap_s#{k}held_p50"]) && num(r["snap_s#{k}none_p50"])
  snapshot_rows.("snapshot #{r["snap_s#{k}_rate"]}/s, hold #{r["snap_s#{k}_hold"]}", "snap_s#{k}none", "snap_s#{k}held")
end
# Held snapshot against release 1.2 (BENCH_SNAPSHOT_BASELINE rounds): the snapshot phase's loads
# on this build and on 1.2 installed in turn in each round. Per load and round, the current
# build's figures beside 1.2's; then, per load, every round's p99 ratio and max with the goals
# (p99 held within 2x of none, max under 100 ms) and "no worse than 1.2" judged on the worst round.
if (rounds = num(r["snap_b_rounds"]))
  lat = ->(p) { "#{fmt(num(r["#{p}_p50"]))} / #{fmt(num(r["#{p}_p99"]))} / #{fmt(num(r["#{p}_max"]))}" }
  both = ->(p, key, scale = nil) { %w[none held].map { |m| (v = num(r["#{p}#{m}_#{key}"])) ? (scale ? fmt(v / scale) : v.round.to_s) : "-" }.join(" / ") }
  p99_ratio = ->(p) { (n = num(r["#{p}none_p99"])) && n > 0 && (h = num(r["#{p}held_p99"])) ? h / n : nil }
  (1..9).each do |k|
    runs = (1..rounds.to_i).map { |rd| ["snap_b#{rd}cur_#{k}", "snap_b#{rd}r12_#{k}", rd] }
                           .select { |c, o, _| num(r["#{c}held_p50"]) && num(r["#{o}held_p50"]) }
    next if runs.empty?
    load = "snapshot #{r["#{runs[0][0]}_rate"]}/s, hold #{r["#{runs[0][0]}_hold"]}"
    runs.each do |c, o, rd|
      tag = "#{load}, round #{rd}"
      add.("#{tag}: none p50 / p99 / max (ms)", lat.("#{c}none"), "1.2", lat.("#{o}none"), nil, "(info)", nil)
      add.("#{tag}: held p50 / p99 / max (ms)", lat.("#{c}held"), "1.2", lat.("#{o}held"), nil, "(info)", nil)
      cr, orr = p99_ratio.(c), p99_ratio.(o)
      add.("#{tag}: p99 held / none", cr, "1.2", orr, nil, "current <= 2x", cr && cr <= 2)
      cm, om = num(r["#{c}held_max"]), num(r["#{o}held_max"])
      add.("#{tag}: max held (ms)", cm, "1.2", om, nil, "current < 100 ms", cm < 100)
      add.("#{tag}: achieved none / held (offered #{r["#{c}_rate"]}/s)", both.(c, "offered"), "1.2", both.(o, "offered"), nil, "(info)", nil)
      add.("#{tag}: largest jobbuf.jobs none / held (kB)", both.(c, "max_bytes", 1024), "1.2", both.(o, "max_bytes", 1024), nil, "(info)", nil)
      add.("#{tag}: rotations none / held", both.(c, "rotations"), "1.2", both.(o, "rotations"), nil, "(info)", nil)
    end
    each = ->(vals) { vals.map { |v| v ? format("%.2f", v) : "-" }.join(" / ") }
    cr, orr = runs.map { |c, _, _| p99_ratio.(c) }, runs.map { |_, o, _| p99_ratio.(o) }
    if cr.all? && orr.all?
      add.("#{load}: p99 held / none, every round", each.(cr), "1.2, every round", each.(orr), cr.max / orr.max,
           "worst <= 2x; cur/1.2 <= 1.05", cr.max <= 2 && cr.max <= 1.05 * orr.max)
    end
    cm, om = runs.map { |c, _, _| num(r["#{c}held_max"]) }, runs.map { |_, o, _| num(r["#{o}held_max"]) }
    if cm.all? && om.all?
      add.("#{load}: max held (ms), every round", each.(cm), "1.2, every round", each.(om), om.max > 0 ? cm.max / om.max : nil,
           "worst < 100 ms; cur/1.2 <= 1.05", cm.max < 100 && cm.max <= 1.05 * om.max)
    end
  end
end
# Held snapshot beside a capped backlog (docs/storage.md, docs/flow.md): the snapshot phase's loads
# with BENCH_CAPPED_BACKLOG jobs held back by max_in_redis, without and with the snapshot, then the
# snapshot-held figures beside the snapshot phase's for the same load (when it ran).
phase = "snapshot_capped"
backlog = num(r["snap_c_backlog"])
(1..9).each do |k|
  next unless backlog && num(r["snap_c#{k}held_p50"]) && num(r["snap_c#{k}none_p50"])
  h = "snap_c#{k}held"
  rate, hold = r["snap_c#{k}_rate"], r["snap_c#{k}_hold"]
  tag = "snapshot #{rate}/s, hold #{hold}, #{fmt(backlog)} capped"
  hp99, hb = snapshot_rows.(tag, "snap_c#{k}none", h)
  # The snapshot phase's run of the same load, side by side.
  s = (1..9).find { |j| r["snap_s#{j}_rate"] == rate && r["snap_s#{j}_hold"] == hold && num(r["snap_s#{j}held_p50"]) }
  next unless s
  sh = "snap_s#{s}held"
  sp99 = num(r["#{sh}_p99"])
  add.("#{tag}: snapshot held, p50 / p99 (ms)", "#{fmt(num(r["#{h}_p50"]))} / #{fmt(hp99)}", "no backlog",
       "#{fmt(num(r["#{sh}_p50"]))} / #{fmt(sp99)}", sp99 > 0 ? hp99 / sp99 : nil, "(info)", nil)
  sb = num(r["#{sh}_max_bytes"]) / 1024
  add.("#{tag}: snapshot held, largest jobbuf.jobs (kB)", hb, "no backlog", sb, sb > 0 ? hb / sb : nil, "(info)", nil)
end
phase = "sustain"
if num(r["sustain_normal_rate"])
  rate = r["sustain_rate"]
  %w[normal held].each do |l|
    next unless num(r["sustain_#{l}_rate"])
    tag = l == "normal" ? "sustained" : "held txn"
    d, o = num(r["sustain_#{l}_rate"]), num(r["sustain_#{l}_offered"])
    add.("#{tag}: delivered (jobs/s)", d, "offered (target #{rate}/s)", o, d / o, "keeps up (info)", nil)
    v = r["sustain_#{l}_size_verdict"].to_s.tr("_", " ")
    a, b = num(r["sustain_#{l}_size_first"]) / 1024, num(r["sustain_#{l}_size_second"]) / 1024
    add.("#{tag}: jobs size kB, max 2nd half", b, "max 1st half", a, a > 0 ? b / a : nil, "bounded: #{v}", l == "normal" ? v == "levels off" : nil)
    v = r["sustain_#{l}_dead_verdict"].to_s.tr("_", " ")
    a, b = num(r["sustain_#{l}_dead_first"]), num(r["sustain_#{l}_dead_second"])
    add.("#{tag}: n_dead_tup, max 2nd half", b, "max 1st half", a, a > 0 ? b / a : nil, "bounded: #{v}", l == "normal" ? v == "levels off" : nil)
    v = r["sustain_#{l}_anon_verdict"].to_s.tr("_", " ")
    a, b = num(r["sustain_#{l}_anon_first"]), num(r["sustain_#{l}_anon_second"])
    add.("#{tag}: worker RssAnon kB, 2nd half", b, "max 1st half", a, a > 0 ? b / a : nil, "flat: #{v}", v == "levels off")
    a, b = num(r["sustain_#{l}_rss_first"]), num(r["sustain_#{l}_rss_second"])
    add.("#{tag}: worker VmRSS kB, 2nd half", b, "max 1st half", a, a > 0 ? b / a : nil, "(incl. shared buffers)", nil)
    add.("#{tag}: latency p50 / p99 (ms)", "#{fmt(num(r["sustain_#{l}_p50"]))} / #{fmt(num(r["sustain_#{l}_p99"]))}", "max", num(r["sustain_#{l}_max"]), nil, "", nil)
  end
  if num(r["sustain_held_rate"])
    h, n = num(r["sustain_held_rate"]), num(r["sustain_normal_rate"])
    add.("held txn vs normal: throughput", h, "normal run (jobs/s)", n, h / n, "held/normal >= 0.50", h / n >= 0.50)
    hb, nb = num(r["sustain_held_max_bytes"]) / 1024, num(r["sustain_normal_max_bytes"]) / 1024
    add.("held txn vs normal: max size kB", hb, "normal run", nb, hb / nb, "(info)", nil)
    add.("held txn: backlog left at end (~rows)", num(r["sustain_held_end_live"]), "catch-up after release (s)", num(r["sustain_held_catchup_s"]), nil, "(info)", nil)
  end
end

phase = "activejob"
if num(r["activejob_jobbuf"])
  j, s = num(r["activejob_jobbuf"]), num(r["activejob_sidekiq"])
  add.("perform_later in a txn, 1 Ruby process (jobs/s)", j, "ActiveJob's Sidekiq adapter", s, j / s, "(info)", nil)
end

phase = "frameworks"
{ "bullmq" => "BullMQ's Queue.addBulk (Node)", "celery" => "Celery's apply_async loop (Python)" }.each do |fw, own|
  next unless num(r["fw_#{fw}_jobbuf"])
  j, o = num(r["fw_#{fw}_jobbuf"]), num(r["fw_#{fw}_own"])
  add.("drain #{r["fw_jobs"]} jobs into #{fw} (jobs/s)", j, own, o, j / o, "jobbuf ahead", j > o)
end

phase = "clients"
[["clients_node_add", "Queue.add in a txn, 1 Node process (jobs/s)", "BullMQ's Queue.add"],
 ["clients_node_addbulk", "Queue.addBulk(100) in a txn, 1 Node process (jobs/s)", "BullMQ's Queue.addBulk"],
 ["clients_celery", "apply_async in a txn, 1 Python process (tasks/s)", "Celery's apply_async"],
 ["clients_sidekiq", "perform_async in a txn, 1 Ruby process (jobs/s)", "Sidekiq's perform_async"]].each do |key, figure, own|
  next unless num(r["#{key}_jobbuf"])
  own_key = r.keys.find { |k| k.start_with?("#{key}_") && k != "#{key}_jobbuf" }
  j, o = num(r["#{key}_jobbuf"]), num(r[own_key])
  add.(figure, j, own, o, o ? j / o : nil, "(info)", nil)
end

phase = "queues"
if r["queues_counts"]
  few, many = r["queues_counts"].split(",").minmax_by(&:to_i)
  f, m = r["queues_#{few}_active"], r["queues_#{many}_active"]
  add.("idle worker CPU, #{m} queues (% of a core)", num(r["queues_#{many}_idle_cpu"]), "#{f} queues",
       num(r["queues_#{few}_idle_cpu"]), nil, "O(queues with work)", nil)
  %w[p50 p99].each do |q|
    v, base = num(r["queues_#{many}_#{q}"]), num(r["queues_#{few}_#{q}"])
    add.("commit -> Redis #{q}, #{m} queues (ms)", v, "#{f} queues", base, base && base > 0 ? v / base : nil, "(info)", nil)
  end
end
if (plain = num(r["flow_plain"]))
  phase = "flow"
  cap, rate = num(r["flow_cap"]), num(r["flow_rate"])
  add.("list drain with max_in_redis above the backlog (jobs/s)", cap, "no option", plain, cap && cap / plain,
       "cap/none >= 0.9", cap && cap / plain >= 0.9)
  add.("list drain with max_rate above the drain (jobs/s)", rate, "no option", plain, rate && rate / plain,
       "rate/none >= 0.95", rate && rate / plain >= 0.95)
end

if (plain = num(r["fair_plain"]))
  phase = "fair"
  one, many = num(r["fair_one"]), num(r["fair_many"])
  add.("list drain, fair_by, 1 partition (jobs/s)", one, "no option", plain, one && one / plain, "(info)", nil)
  add.("list drain, fair_by, a partition per job (jobs/s)", many, "no option", plain, many && many / plain, "(info)", nil)
end

if (n = r["sched_count"]) && num(r["sched_#{n}_idle_cpu"])
  phase = "schedules"
  many, none = num(r["sched_#{n}_idle_cpu"]), num(r["sched_0_idle_cpu"])
  add.("idle worker CPU, #{fmt(num(n))} schedules none due (% of a core)", many, "no schedule", none, nil,
       "within 1 point of no schedule", many - none <= 1.0)
  add.("  commit -> Redis p99 with them (ms)", num(r["sched_#{n}_p99"]), "no schedule", num(r["sched_0_p99"]), nil, "(info)", nil)
end

if settings == "--rows"
  rows.each { |x| puts x.join("\t") }
  exit
end

headers = ["figure", "jobbuf", "comparison", "value", "ratio", "target", "met"]
widths = headers.each_index.map { |i| ([headers[i]] + rows.map { |x| x[i].to_s }).map(&:length).max }
line = ->(cells) { cells.each_with_index.map { |c, i| i == 0 || i == 2 || i == 5 ? c.to_s.ljust(widths[i]) : c.to_s.rjust(widths[i]) }.join(" | ") }
puts "jobbuf benchmark (#{settings})"
puts line.(headers)
puts widths.map { |w| "-" * w }.join("-+-")
rows.each { |x| puts line.(x[0, 7]) }
