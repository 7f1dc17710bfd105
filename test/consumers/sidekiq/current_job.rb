# Sidekiq server middleware shared by the test apps: the job hash, as Sidekiq parsed it, is
# JobbufCurrentJob.hash while the job performs (what the job records about how it arrived).
module JobbufCurrentJob
  KEY = :jobbuf_current_sidekiq_job

  def self.hash
    Thread.current[KEY] || {}
  end

  class Middleware
    def call(_worker, job, _queue)
      Thread.current[KEY] = job
      yield
    ensure
      Thread.current[KEY] = nil
    end
  end
end
