# `require "jobbuf"` (what Bundler requires for `gem "jobbuf"`): the ActiveJob adapter, as
# `require "jobbuf/active_job"` loads it.
require "jobbuf/active_job"
