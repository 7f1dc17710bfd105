# Staging client for the fault-injection run (test/faults/delivery_faults.sh): stages one job per
# transaction, numbered from a start value, until a stop file appears, and survives server
# restarts by reconnecting. It records the outcome of every transaction in three logs:
#
#   committed.log  COMMIT returned successfully: the job must reach Redis exactly once
#   unknown.log    COMMIT was sent but failed or the connection died: delivered at most once
#   aborted.log    never committed (an error before COMMIT, or a deliberate ROLLBACK every
#                  tenth transaction): must never reach Redis
#
# usage: ruby stage_client.rb HOST PORT DB QUEUE FIRST_N DIR
require "pg"

host, port, db, queue, first_n, dir = ARGV
n = Integer(first_n)
stop_file = File.join(dir, "stop")
logs = %w[committed unknown aborted].to_h do |name|
  file = File.open(File.join(dir, "#{name}.log"), "a")
  file.sync = true
  [name.to_sym, file]
end
stats = Hash.new(0)
conn = nil

until File.exist?(stop_file)
  if conn.nil?
    begin
      conn = PG.connect(host: host, port: port, dbname: db, user: "postgres", connect_timeout: 2)
    rescue PG::Error
      stats[:reconnect_failures] += 1
      sleep 0.1
      next
    end
  end
  n += 1
  commit_sent = false
  begin
    conn.exec("BEGIN")
    conn.exec_params("SELECT jobbuf_stage($1, jsonb_build_object('n', $2::bigint))", [queue, n])
    if (n % 10).zero?
      conn.exec("ROLLBACK")
      logs[:aborted].puts(n)
      stats[:rolled_back] += 1
      next
    end
    commit_sent = true
    result = conn.exec("COMMIT")
    if result.cmd_status == "COMMIT"
      logs[:committed].puts(n)
      stats[:committed] += 1
    else
      logs[:aborted].puts(n) # the transaction had failed: COMMIT answers ROLLBACK
      stats[:aborted] += 1
    end
  rescue PG::Error
    if commit_sent
      logs[:unknown].puts(n)
      stats[:unknown] += 1
    else
      logs[:aborted].puts(n)
      stats[:aborted] += 1
    end
    begin
      conn.close
    rescue PG::Error
      nil
    end
    conn = nil
    sleep 0.05
  end
end
conn&.close
warn "stage_client: last n #{n}, #{stats.map { |k, v| "#{k} #{v}" }.join(', ')}"
