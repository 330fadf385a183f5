"""The state.db schema as an ordered list of forward migrations.

A migration is never edited once released: a database written by an older console must open and be
upgraded step by step. Add a new entry at the end instead. Instants are integer UTC epoch
milliseconds (columns ending in ``_ms``); JSON columns hold lists/objects as text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


V1 = Migration(
    1,
    "initial schema",
    (
        """CREATE TABLE boxes (
            name TEXT PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT 'ssh',          -- 'ssh' or 'local'
            ssh_user TEXT, host TEXT, port INTEGER,
            key_path TEXT,                              -- a path only, never key material
            provider TEXT, instance_id TEXT,
            price_per_hour REAL,
            host_key TEXT,                              -- the public key the operator trusted (OpenSSH line)
            host_key_source TEXT,                       -- 'known_hosts', 'tofu' or NULL
            status TEXT NOT NULL DEFAULT 'new',         -- new, connecting, up, down, host-key-changed, destroyed
            status_detail TEXT,
            agent_version TEXT,
            tz TEXT,                                    -- the box's time zone, as probed
            gpu_summary TEXT,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            last_seen_ms INTEGER,
            destroyed_ms INTEGER
        )""",
        """CREATE TABLE journal (
            box TEXT NOT NULL REFERENCES boxes(name) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            t_ms INTEGER NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,                      -- the whole event as JSON
            ingested_ms INTEGER NOT NULL,
            UNIQUE (box, seq)
        )""",
        "CREATE INDEX journal_box_kind_t ON journal(box, kind, t_ms)",
        """CREATE TABLE ingest_cursor (
            box TEXT PRIMARY KEY REFERENCES boxes(name) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL
        )""",
        """CREATE TABLE commands (
            id TEXT PRIMARY KEY,                        -- the id the agent deduplicates on
            box TEXT NOT NULL,
            op TEXT NOT NULL,
            args TEXT NOT NULL,                         -- JSON
            state TEXT NOT NULL DEFAULT 'pending',      -- pending, sent, acked, failed
            created_ms INTEGER NOT NULL,
            sent_ms INTEGER, acked_ms INTEGER,
            result TEXT, error TEXT
        )""",
        "CREATE INDEX commands_box_state ON commands(box, state)",
        """CREATE TABLE probes (
            id INTEGER PRIMARY KEY,
            box TEXT NOT NULL,
            t_ms INTEGER NOT NULL,
            console_t_ms INTEGER,                       -- the console clock when the probe was asked for
            data TEXT NOT NULL                          -- the agent's probe result as JSON
        )""",
        "CREATE INDEX probes_box_t ON probes(box, t_ms)",
        """CREATE TABLE check_verdicts (
            id INTEGER PRIMARY KEY,
            box TEXT NOT NULL,
            probe_id INTEGER REFERENCES probes(id) ON DELETE CASCADE,
            t_ms INTEGER NOT NULL,
            check_name TEXT NOT NULL,                   -- power, driver, topology, clock, capacity, ...
            verdict TEXT NOT NULL CHECK (verdict IN ('ok', 'warn', 'fail')),
            reason TEXT NOT NULL,
            numbers TEXT                                -- JSON: the figures behind the verdict
        )""",
        "CREATE INDEX check_verdicts_box_t ON check_verdicts(box, t_ms)",
        """CREATE TABLE arms (
            id INTEGER PRIMARY KEY,
            arm TEXT NOT NULL,
            model TEXT NOT NULL,
            box TEXT NOT NULL,
            recipe_hash TEXT NOT NULL,                  -- sha256 of the resolved {argv, env, gpus}
            argv TEXT NOT NULL,                         -- JSON list, one element per argument
            env TEXT NOT NULL,                          -- JSON object
            gpus TEXT NOT NULL,                         -- JSON list of replicas, each a list of GPU indexes
            tensor_parallel INTEGER NOT NULL DEFAULT 1,
            lint TEXT,                                  -- JSON list of findings at resolve time
            created_ms INTEGER NOT NULL,
            UNIQUE (arm, box, recipe_hash)
        )""",
        """CREATE TABLE launches (
            id TEXT PRIMARY KEY,
            box TEXT NOT NULL,
            arm TEXT NOT NULL,
            arm_id INTEGER REFERENCES arms(id),
            replica INTEGER NOT NULL DEFAULT 0,
            gpus TEXT,                                  -- JSON list
            port INTEGER,
            pid INTEGER,
            state TEXT NOT NULL DEFAULT 'requested',    -- requested, starting, serving, failed, stopping, stopped
            start_ms INTEGER, ready_ms INTEGER, stop_ms INTEGER,
            exit_code INTEGER,
            failure_reason TEXT,                        -- innermost traceback frame and message
            backends_accepted TEXT,                     -- JSON list the engine printed, if any
            log_path TEXT,
            forced INTEGER NOT NULL DEFAULT 0,          -- launched past a failed check with --force
            kv_cache_tokens INTEGER,
            max_concurrency REAL,
            gpu_mem_released INTEGER                    -- 1 when NVML confirmed the memory freed after kill
        )""",
        "CREATE INDEX launches_box_state ON launches(box, state)",
        "CREATE INDEX launches_arm ON launches(arm)",
        """CREATE TABLE kernel_lines (
            id INTEGER PRIMARY KEY,
            box TEXT NOT NULL,
            launch_id TEXT NOT NULL,
            t_ms INTEGER NOT NULL,
            category TEXT NOT NULL,                     -- linear, moe, attention, config, other
            line TEXT NOT NULL
        )""",
        "CREATE INDEX kernel_lines_launch ON kernel_lines(launch_id)",
        """CREATE TABLE gpu_samples (
            box TEXT NOT NULL,
            gpu INTEGER NOT NULL,
            t_ms INTEGER NOT NULL,
            power_w REAL, power_limit_w REAL, enforced_limit_w REAL, max_limit_w REAL,
            sm_clock_mhz REAL, util_pct REAL, mem_used_mib REAL, mem_total_mib REAL, temp_c REAL,
            PRIMARY KEY (box, gpu, t_ms)
        ) WITHOUT ROWID""",
        "CREATE INDEX gpu_samples_box_t ON gpu_samples(box, t_ms)",
        """CREATE TABLE server_samples (
            box TEXT NOT NULL,
            launch_id TEXT NOT NULL,
            t_ms INTEGER NOT NULL,
            gen_tok_per_s REAL, prompt_tok_per_s REAL,
            running REAL, waiting REAL, kv_usage REAL, prefix_hit_rate REAL,
            gen_tokens_total REAL, prompt_tokens_total REAL,
            PRIMARY KEY (launch_id, t_ms)
        ) WITHOUT ROWID""",
        "CREATE INDEX server_samples_box_t ON server_samples(box, t_ms)",
        """CREATE TABLE tripwire_runs (
            id INTEGER PRIMARY KEY,
            box TEXT, launch_id TEXT, arm TEXT NOT NULL, model TEXT,
            t_ms INTEGER NOT NULL,
            ok INTEGER NOT NULL, degenerate INTEGER NOT NULL, wrong INTEGER NOT NULL, total INTEGER NOT NULL,
            passed INTEGER NOT NULL,                    -- 1 when the arm may be trusted
            reasoning_leak INTEGER NOT NULL DEFAULT 0,  -- chain of thought found in the answer
            items TEXT,                                 -- JSON per-item verdicts
            source TEXT NOT NULL DEFAULT 'measured',    -- measured or imported
            provenance TEXT
        )""",
        "CREATE INDEX tripwire_runs_arm ON tripwire_runs(arm, t_ms)",
        """CREATE TABLE bench_runs (
            id INTEGER PRIMARY KEY,
            box TEXT, launch_id TEXT,
            arm TEXT NOT NULL, model TEXT, configuration TEXT,
            shape TEXT NOT NULL, concurrency INTEGER NOT NULL,
            prompts INTEGER, seed INTEGER, input_len INTEGER, output_len INTEGER, prefix_len INTEGER,
            started_ms INTEGER, ended_ms INTEGER, duration_s REAL,
            requests INTEGER, failed INTEGER,
            req_per_s REAL, in_tok_per_s REAL, out_tok_per_s REAL, total_tok_per_s REAL,
            ttft_ms_p50 REAL, ttft_ms_p99 REAL, tpot_ms_p50 REAL, tpot_ms_p99 REAL,
            itl_ms_p50 REAL, itl_ms_p99 REAL, e2e_ms_p50 REAL, e2e_ms_p99 REAL,
            steady TEXT,                                -- JSON: the same keys over the steady-state window
            client_cpu REAL,
            client_bound INTEGER NOT NULL DEFAULT 0,
            kernel_line TEXT,                           -- what the engine said it used, beside the number
            power_limit_w REAL,                         -- the enforced limit it ran under
            tripwire_id INTEGER REFERENCES tripwire_runs(id),
            diagnostic_only INTEGER NOT NULL DEFAULT 0, -- the arm failed its tripwire
            queueing INTEGER NOT NULL DEFAULT 0,        -- concurrency beyond what the server admits
            source TEXT NOT NULL DEFAULT 'measured',
            provenance TEXT,
            raw TEXT                                    -- the load generator's JSON as it came
        )""",
        "CREATE INDEX bench_runs_arm ON bench_runs(arm, shape, concurrency)",
        "CREATE INDEX bench_runs_box_t ON bench_runs(box, started_ms)",
        """CREATE TABLE timers (
            id INTEGER PRIMARY KEY,
            box TEXT NOT NULL,
            deadline_ms INTEGER NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('stop-arms', 'shutdown', 'destroy')),
            state TEXT NOT NULL DEFAULT 'armed',        -- armed, firing, fired, cancelled, failed
            input_text TEXT,                            -- what the operator typed, for the record
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL
        )""",
        "CREATE INDEX timers_box_state ON timers(box, state)",
        """CREATE TABLE timer_log (
            id INTEGER PRIMARY KEY,
            timer_id INTEGER NOT NULL REFERENCES timers(id) ON DELETE CASCADE,
            t_ms INTEGER NOT NULL,
            event TEXT NOT NULL,                        -- armed, warn-30m, warn-10m, warn-1m, pulled, fired, refused-early, ...
            enforcer TEXT,                              -- console or agent
            now_ms INTEGER, deadline_ms INTEGER, remaining_s REAL, tz TEXT,
            detail TEXT                                 -- JSON
        )""",
        "CREATE INDEX timer_log_timer ON timer_log(timer_id, t_ms)",
    ),
)

V2 = Migration(
    2,
    "imported data provenance and API prices",
    (
        """CREATE TABLE imports (
            id INTEGER PRIMARY KEY,
            t_ms INTEGER NOT NULL,
            source TEXT NOT NULL,                       -- e.g. the seed write-up's data file
            provenance TEXT NOT NULL,                   -- where the figures come from, for a reader
            rows INTEGER NOT NULL
        )""",
        """CREATE TABLE api_prices (
            model TEXT NOT NULL,
            provider TEXT NOT NULL,
            in_per_mtok REAL NOT NULL,                  -- USD per million input tokens
            out_per_mtok REAL NOT NULL,                 -- USD per million output tokens
            note TEXT,
            t_ms INTEGER NOT NULL,
            PRIMARY KEY (model, provider)
        )""",
    ),
)

V3 = Migration(
    3,
    "where a box keeps its serving environment, models and agent",
    (
        "ALTER TABLE boxes ADD COLUMN serving_env TEXT",  # venv/conda prefix whose bin/ has vllm; NULL = PATH
        "ALTER TABLE boxes ADD COLUMN model_root TEXT",  # directory holding local checkpoints on the box
        "ALTER TABLE boxes ADD COLUMN agent_home TEXT",  # the agent's directory; NULL = ~/.campaign-agent
    ),
)

V4 = Migration(
    4,
    "task-accuracy runs, cached-input API prices, rows traced to their import",
    (
        """CREATE TABLE eval_runs (
            id INTEGER PRIMARY KEY,
            box TEXT, arm TEXT,                         -- the arm the suite ran against, when known
            model TEXT NOT NULL,
            configuration TEXT NOT NULL,                -- how the model was served, in words
            t_ms INTEGER NOT NULL,
            items INTEGER NOT NULL,                     -- items scored (a short run is flattered: see note)
            overall REAL NOT NULL,                      -- accuracy 0..1 over the scored items
            families TEXT,                              -- JSON {maths: 0.8, code: ...}
            note TEXT,
            source TEXT NOT NULL DEFAULT 'measured',    -- measured or imported
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE
        )""",
        "CREATE INDEX eval_runs_arm ON eval_runs(arm, box)",
        "ALTER TABLE api_prices ADD COLUMN cached_in_per_mtok REAL",  # NULL: cached input pays full price
        "ALTER TABLE imports ADD COLUMN digest TEXT",  # sha256 of the files read: re-import is a no-op
        "ALTER TABLE bench_runs ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        "ALTER TABLE tripwire_runs ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
    ),
)

V5 = Migration(
    5,
    "resumable sweeps: one row per sweep run and per arm tried, with its outcome and benches",
    (
        """CREATE TABLE sweeps (
            id INTEGER PRIMARY KEY,
            list TEXT NOT NULL,                         -- the sweep list's name in the recipes
            box TEXT NOT NULL,
            shapes TEXT NOT NULL,                       -- JSON list of shape names
            concurrency TEXT NOT NULL,                  -- JSON list of concurrencies
            bench_degenerate INTEGER NOT NULL DEFAULT 0, -- bench arms that failed the tripwire too
            state TEXT NOT NULL DEFAULT 'running',      -- running, interrupted, done, abandoned (replaced by a new one)
            runner_pid INTEGER, runner_host TEXT,       -- the console process walking it (one at a time)
            detail TEXT,                                -- why it stopped, when it did not finish
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL
        )""",
        "CREATE INDEX sweeps_list_box ON sweeps(list, box, state)",
        """CREATE TABLE sweep_arms (
            id INTEGER PRIMARY KEY,
            sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,                  -- walk order
            arm TEXT NOT NULL,                          -- a recipe arm, or base@linear+moe for a candidate pair
            base TEXT, linear_backend TEXT, moe_backend TEXT,  -- set for candidates derived from a base arm
            origin TEXT NOT NULL,                       -- list, pair, or accepted (named by an engine refusal)
            queued_by TEXT,                             -- the arm whose refusal named this candidate
            state TEXT NOT NULL DEFAULT 'pending',      -- pending, running, served, refused, degenerate, crashed, interrupted
            attempts INTEGER NOT NULL DEFAULT 0,
            reason TEXT,                                -- the engine's own message when it did not serve
            backends_accepted TEXT,                     -- JSON list the engine said it accepts
            backends_potential TEXT,                    -- JSON list the engine chose from ("potential backends")
            launch_ids TEXT,                            -- JSON list of the current attempt's launches
            gpu_mem_mib REAL,                           -- the card's memory
            kv_cache_tokens INTEGER, max_concurrency REAL,  -- the engine's start-up budget
            tripwire_run_id INTEGER REFERENCES tripwire_runs(id),
            started_ms INTEGER, ended_ms INTEGER,
            UNIQUE (sweep_id, arm)
        )""",
        """CREATE TABLE sweep_benches (
            sweep_arm_id INTEGER NOT NULL REFERENCES sweep_arms(id) ON DELETE CASCADE,
            launch_id TEXT NOT NULL,
            shape TEXT NOT NULL,
            concurrency INTEGER NOT NULL,
            bench_run_id INTEGER REFERENCES bench_runs(id),
            error TEXT,                                 -- why no bench row came back
            admitted INTEGER,                           -- streams the server admits at once for this shape
            t_ms INTEGER NOT NULL,
            PRIMARY KEY (sweep_arm_id, launch_id, shape, concurrency)
        )""",
    ),
)

V6 = Migration(
    6,
    "each measured result names the console command that asked for it",
    (
        "ALTER TABLE bench_runs ADD COLUMN run_id TEXT",  # the bench command's id (bench-...)
        "ALTER TABLE tripwire_runs ADD COLUMN run_id TEXT",  # the tripwire command's id
        "CREATE UNIQUE INDEX bench_runs_run_id ON bench_runs(run_id) WHERE run_id IS NOT NULL",
        "CREATE UNIQUE INDEX tripwire_runs_run_id ON tripwire_runs(run_id) WHERE run_id IS NOT NULL",
    ),
)

V7 = Migration(
    7,
    "the campaign's identity on every box journal, and quarantined malformed events",
    (
        """CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        # The consumer id this state.db gives each box's journal: made once, never copied by the console.
        "INSERT INTO meta(key, value) VALUES ('campaign_id', lower(hex(randomblob(16))))",
        """CREATE TABLE quarantine (
            box TEXT NOT NULL REFERENCES boxes(name) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            t_ms INTEGER,                               -- the event's instant, when it had a valid one
            kind TEXT,                                  -- its kind, when it had a valid one
            raw TEXT NOT NULL,                          -- the event as it came (a corrupt row: the box's stored text)
            reason TEXT NOT NULL,                       -- why it was not ingested
            quarantined_ms INTEGER NOT NULL,
            UNIQUE (box, seq)
        )""",
    ),
)

V8 = Migration(
    8,
    "the quality ledger: task-accuracy runs per item, bound to the launch they ran against; published pairs",
    (
        """CREATE TABLE quality_runs (
            id INTEGER PRIMARY KEY,
            launch_id TEXT,                             -- the launch the harness ran against (NULL: published figures)
            box TEXT, arm TEXT,
            arm_id INTEGER REFERENCES arms(id),         -- the exact argv/env/GPUs it ran against
            recipe_hash TEXT,
            model TEXT,                                 -- the model as the harness named it
            tensor_parallel INTEGER, data_parallel INTEGER, replicas INTEGER,
            expert_parallel INTEGER,                    -- 1 with --enable-expert-parallel
            layout TEXT,                                -- the same in words: TP1 x DP4 + EP
            kernel_line TEXT,                           -- the kernels the launch's engine said it used
            reasoning_parser TEXT,                      -- --reasoning-parser of the arm, if any
            harness TEXT NOT NULL,                      -- lm-eval, inspect, or published (a write-up's figures)
            harness_version TEXT,
            tasks TEXT NOT NULL,                        -- JSON list of task names
            metric TEXT,                                -- what an item's score is (exact_match,strict-match; match)
            suite TEXT NOT NULL,                        -- runs on one suite are compared against one noise floor
            config_key TEXT,                            -- equal for repeats of one configuration (sha256)
            sampling TEXT,                              -- JSON: the generation settings the harness says it sent
            thinking TEXT,                              -- thinking/reasoning setting sent, when the file says
            label TEXT NOT NULL,                        -- how lists name the run
            source_file TEXT,
            digest TEXT,                                -- sha256 of the files read: the same files and metric twice is a no-op
            t_ms INTEGER NOT NULL,                      -- when the harness ran (its own clock), else the import
            imported_ms INTEGER NOT NULL,
            items INTEGER NOT NULL,                     -- items scored
            unscored INTEGER NOT NULL DEFAULT 0,        -- items the file lists without a score (errors)
            accuracy REAL NOT NULL,                     -- mean item score, 0..1
            truncation_rate REAL,                       -- share of items cut off at the token cap; NULL: not logged
            mean_output_tokens REAL,                    -- NULL: not logged
            eval_run_id INTEGER REFERENCES eval_runs(id) ON DELETE SET NULL,  -- the aggregate economics reads
            source TEXT NOT NULL DEFAULT 'measured',    -- measured or imported
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE
        )""",
        "CREATE UNIQUE INDEX quality_runs_file ON quality_runs(digest, launch_id, metric) WHERE launch_id IS NOT NULL",
        "CREATE INDEX quality_runs_suite ON quality_runs(suite, config_key)",
        """CREATE TABLE quality_items (
            run_id INTEGER NOT NULL REFERENCES quality_runs(id) ON DELETE CASCADE,
            task TEXT NOT NULL,
            item_id TEXT NOT NULL,                      -- the harness's own id (lm-eval doc_id, Inspect sample id)
            score REAL NOT NULL,                        -- 0..1; 1 is right
            truncated INTEGER,                          -- 1 cut off at the token cap, 0 not; NULL: not logged
            output_tokens INTEGER,                      -- NULL: not logged
            PRIMARY KEY (run_id, task, item_id)
        ) WITHOUT ROWID""",
        """CREATE TABLE quality_pairs (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('repeat', 'comparison')),  -- repeat: one configuration twice
            a_run INTEGER NOT NULL REFERENCES quality_runs(id) ON DELETE CASCADE,
            b_run INTEGER NOT NULL REFERENCES quality_runs(id) ON DELETE CASCADE,
            items INTEGER NOT NULL,                     -- items both runs scored
            a_only INTEGER NOT NULL, b_only INTEGER NOT NULL,  -- items only A / only B got right
            a_accuracy REAL, b_accuracy REAL,           -- on the common items, where published
            a_truncation REAL, b_truncation REAL,
            a_mean_tokens REAL, b_mean_tokens REAL,
            note TEXT,
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE
        )""",
        "ALTER TABLE boxes ADD COLUMN max_power_w REAL",  # the board maximum where no GPU sample says it
    ),
)

V9 = Migration(
    9,
    "node rows: every replica measured at once with per-replica detail, and the conditions of each number",
    (
        "ALTER TABLE bench_runs ADD COLUMN replicas INTEGER",  # serving replicas measured at once (the node)
        "ALTER TABLE bench_runs ADD COLUMN prefix_caching INTEGER",  # 1 on, 0 off, NULL: not known
        "ALTER TABLE bench_runs ADD COLUMN kernel_fallback INTEGER NOT NULL DEFAULT 0",  # a kernel other than asked
        "ALTER TABLE bench_runs ADD COLUMN kernel_check TEXT",  # JSON per layer kind: requested, status, used
        "ALTER TABLE bench_runs ADD COLUMN admitted INTEGER",  # streams one replica admits at once for this shape
        "ALTER TABLE bench_runs ADD COLUMN repeat_group TEXT",  # the runs of one `campaign bench --repeat N`
        "CREATE INDEX bench_runs_repeat_group ON bench_runs(repeat_group) WHERE repeat_group IS NOT NULL",
        """CREATE TABLE bench_replicas (
            bench_run_id INTEGER NOT NULL REFERENCES bench_runs(id) ON DELETE CASCADE,
            replica INTEGER NOT NULL,                   -- position in the node run, 0..replicas-1
            launch_id TEXT,
            base_url TEXT,
            streams INTEGER,                            -- of the run's concurrency, the streams sent to it
            requests INTEGER, failed INTEGER,
            req_per_s REAL, in_tok_per_s REAL, out_tok_per_s REAL, total_tok_per_s REAL,
            ttft_ms_p50 REAL, ttft_ms_p99 REAL, tpot_ms_p50 REAL, tpot_ms_p99 REAL,
            itl_ms_p50 REAL, itl_ms_p99 REAL, e2e_ms_p50 REAL, e2e_ms_p99 REAL,
            PRIMARY KEY (bench_run_id, replica)
        )""",
        "ALTER TABLE launches ADD COLUMN launch_group TEXT",  # the replicas started by one launch share it
        # Before this version a console bench measured one replica, whatever the arm's layout; the
        # imported tables are per node, so their replicas are the arm's.
        "UPDATE bench_runs SET replicas = 1 WHERE source != 'imported'",
        """UPDATE bench_runs SET replicas = (
            SELECT json_array_length(a.gpus) FROM launches l JOIN arms a ON a.id = l.arm_id
            WHERE l.id = bench_runs.launch_id) WHERE source = 'imported'""",
    ),
)

V10 = Migration(
    10,
    "logit-level divergence: a pair of servers compared on identical contexts, read against a control pair",
    (
        """CREATE TABLE kldiff_runs (
            id INTEGER PRIMARY KEY,
            run_id TEXT,                                -- the kldiff command's id (kldiff-...); NULL when imported
            role TEXT NOT NULL DEFAULT 'pair' CHECK (role IN ('pair', 'control')),  -- control: one configuration twice
            box TEXT,
            model TEXT,
            launch_a TEXT, launch_b TEXT,               -- a is the reference: KL(a||b)
            arm_a TEXT NOT NULL, arm_b TEXT NOT NULL,
            kernel_a TEXT, kernel_b TEXT,               -- the kernel lines each engine printed, beside the figures
            t_ms INTEGER NOT NULL,
            contexts INTEGER,
            positions INTEGER,                          -- positions compared (NULL: the source does not say)
            top_k INTEGER,                              -- log-probabilities per position and side
            top1_agreement REAL,                        -- share of positions whose most likely token is the same
            top5_overlap REAL,
            mean_kl REAL NOT NULL,                      -- KL(a||b) in nats, mean over the positions
            p50_kl REAL, p99_kl REAL,
            missing_token_method TEXT,                  -- how a token listed by one side only was treated
            control_id INTEGER REFERENCES kldiff_runs(id) ON DELETE SET NULL,  -- the control pair's own row
            control_arm_a TEXT, control_arm_b TEXT,     -- the control's figures, copied: the row reads alone
            control_positions INTEGER, control_top1_agreement REAL, control_mean_kl REAL,
            excess_kl REAL,                             -- mean_kl - control_mean_kl
            verdict TEXT,                               -- the read model's words (docs/kldiff.md); NULL: no control
            note TEXT,
            source TEXT NOT NULL DEFAULT 'measured',    -- measured or imported
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE,
            raw TEXT                                    -- the tool's JSON as it came
        )""",
        "CREATE UNIQUE INDEX kldiff_runs_run_id ON kldiff_runs(run_id) WHERE run_id IS NOT NULL",
        "CREATE INDEX kldiff_runs_t ON kldiff_runs(t_ms)",
    ),
)


V11 = Migration(
    11,
    "what each bench and tripwire row was served with: the reasoning parser, thinking, the sampling sent",
    (
        # console/store/served.py says what each value means; NULL: not recorded (imported, or older rows).
        "ALTER TABLE bench_runs ADD COLUMN reasoning_parser TEXT",  # the server's --reasoning-parser
        "ALTER TABLE bench_runs ADD COLUMN thinking TEXT",  # whether thinking was on, and what decided it
        "ALTER TABLE bench_runs ADD COLUMN sampling TEXT",  # JSON: the sampling fields sent; {} none
        "ALTER TABLE tripwire_runs ADD COLUMN reasoning_parser TEXT",
        "ALTER TABLE tripwire_runs ADD COLUMN thinking TEXT",
        "ALTER TABLE tripwire_runs ADD COLUMN sampling TEXT",
    ),
)


V12 = Migration(
    12,
    "one sweep over several boxes: the boxes it feeds, where each attempt of an arm ran, its GPU memory before and after",
    (
        # node: each arm on every card of its one box (one replica per card); packed: each arm on the fewest
        # GPUs its layout needs, arms side by side on separate GPUs of the sweep's boxes.
        "ALTER TABLE sweeps ADD COLUMN layout TEXT NOT NULL DEFAULT 'node'",
        """CREATE TABLE sweep_boxes (
            sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
            box TEXT NOT NULL,
            position INTEGER NOT NULL,                  -- the order the operator named the boxes in
            state TEXT NOT NULL DEFAULT 'walking',      -- walking; out (unreachable, its agent gone, or it refused:
                                                        -- detail says which); left (not part of the resumed run)
            detail TEXT,
            excluded TEXT,                              -- JSON {gpu: why}: held by something else before an arm used it
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (sweep_id, box)
        )""",
        "INSERT INTO sweep_boxes(sweep_id, box, position, updated_ms) SELECT id, box, 0, updated_ms FROM sweeps",
        "ALTER TABLE sweep_arms ADD COLUMN box TEXT",  # where the current (or last) attempt runs
        "ALTER TABLE sweep_arms ADD COLUMN gpus TEXT",  # JSON list of its GPUs; NULL: every card of the box
        """CREATE TABLE sweep_attempts (
            sweep_arm_id INTEGER NOT NULL REFERENCES sweep_arms(id) ON DELETE CASCADE,
            attempt INTEGER NOT NULL,                   -- 1, 2 ...; sweep_arms.attempts is the latest
            box TEXT NOT NULL,
            gpus TEXT,                                  -- JSON list; NULL: every card of the box
            launch_ids TEXT,                            -- JSON list, recorded before the launch is sent
            mem_before TEXT, mem_after TEXT,            -- JSON {gpu: MiB used}: read before the launch, once it served
            outcome TEXT,                               -- NULL while it runs; served, refused, degenerate, crashed,
                                                        -- interrupted (given back to the queue: reason says why)
            reason TEXT,
            started_ms INTEGER NOT NULL,
            ended_ms INTEGER,
            PRIMARY KEY (sweep_arm_id, attempt)
        )""",
        "UPDATE sweep_arms SET box = (SELECT s.box FROM sweeps s WHERE s.id = sweep_arms.sweep_id) WHERE attempts > 0",
        # The attempts before this version left only their last one on the arm's row.
        """INSERT INTO sweep_attempts(sweep_arm_id, attempt, box, launch_ids, outcome, reason, started_ms, ended_ms)
           SELECT a.id, a.attempts, s.box, a.launch_ids, CASE WHEN a.state IN ('pending', 'running') THEN NULL
                  ELSE a.state END, a.reason, coalesce(a.started_ms, s.created_ms), a.ended_ms
           FROM sweep_arms a JOIN sweeps s ON s.id = a.sweep_id WHERE a.attempts > 0""",
    ),
)

V13 = Migration(
    13,
    "journal seqs a box no longer held when this state.db asked for them: recorded, never skipped silently",
    (
        """CREATE TABLE lost_events (
            box TEXT NOT NULL REFERENCES boxes(name) ON DELETE CASCADE,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,                  -- inclusive: seqs first_seq..last_seq never arrived
            reason TEXT NOT NULL,
            recorded_ms INTEGER NOT NULL,
            PRIMARY KEY (box, first_seq)
        )""",
    ),
)

V14 = Migration(
    14,
    "every measured request's timings of a bench run: any latency definition or SLO is computed afterwards",
    (
        # The load generator's request_timings block (agents/loadgen/run.py), one row per request; durations
        # and offsets in ms (REAL, not instants); NULL where the request had nothing to measure.
        """CREATE TABLE bench_requests (
            bench_run_id INTEGER NOT NULL REFERENCES bench_runs(id) ON DELETE CASCADE,
            i INTEGER NOT NULL,                         -- the row's place in the block: requests sorted by start
            start_ms REAL,                              -- sent, ms after the timed run's start
            target INTEGER,                             -- the base URL (replica) that served it, 0..replicas-1
            ttft_ms REAL,                               -- sent to its first token event
            tpot_ms REAL,                               -- (e2e - ttft) / (out_tokens - 1); NULL at one token or none
            itl_p50_ms REAL,                            -- median gap between its token events
            itl_max_ms REAL,                            -- largest gap between its token events
            e2e_ms REAL,                                -- sent to its last token event
            in_tokens INTEGER,                          -- prompt tokens the server counted; NULL: not reported
            out_tokens INTEGER,                         -- completion tokens (server's count, else token events)
            error TEXT,                                 -- why it failed; NULL: it succeeded
            PRIMARY KEY (bench_run_id, i)
        )""",
    ),
)

V15 = Migration(
    15,
    "curves: one arm measured at a list of concurrencies, each point a node row, resumable point by point",
    (
        # A curve is identified by (arm, box, shape, concurrency, repeat): the same command resumes the newest
        # one (nothing, once it is done). Each point is measured by the bench (`Service.bench`), rows in bench_runs.
        """CREATE TABLE curves (
            id INTEGER PRIMARY KEY,
            arm TEXT NOT NULL,                          -- the arm's name (a launch id given resolves to its arm)
            box TEXT NOT NULL,                          -- the box its node was measured on
            shape TEXT NOT NULL,                        -- the workload shape (recipes/shapes.toml)
            concurrency TEXT NOT NULL,                  -- JSON list of the points' C, ascending, no repeats
            repeat INTEGER NOT NULL,                    -- runs per point: above 1, each point is a repeat group
            prompts_per_slot INTEGER,                   -- measured requests per stream (prompts = K x C);
                                                        -- NULL: the bench's default
            created_ms INTEGER NOT NULL,                -- when the curve was first asked for
            updated_ms INTEGER NOT NULL,                -- its latest change of state or point
            -- running (or its console died), done (every point stored), interrupted (stopped, or a point
            -- failed: the same command measures the points not yet stored)
            state TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'interrupted'))
        )""",
        "CREATE INDEX curves_identity ON curves(arm, box, shape, state)",
        """CREATE TABLE curve_points (
            curve_id INTEGER NOT NULL REFERENCES curves(id) ON DELETE CASCADE,
            concurrency INTEGER NOT NULL,               -- the streams in flight at this point (its -c)
            position INTEGER NOT NULL,                  -- 0.. in the curve's concurrency list
            state TEXT NOT NULL DEFAULT 'pending'       -- pending, running (or its console died), done, failed
                CHECK (state IN ('pending', 'running', 'done', 'failed')),
            reason TEXT,                                -- why it failed or was interrupted; NULL otherwise
            repeat_group TEXT,                          -- bench_runs.repeat_group of its runs (repeat above 1)
            bench_run_ids TEXT,                         -- JSON list of its bench_runs ids, in run order
            started_ms INTEGER,                         -- when its latest measurement began
            ended_ms INTEGER,                           -- when it was stored, failed or interrupted
            PRIMARY KEY (curve_id, position),
            UNIQUE (curve_id, concurrency)
        )""",
    ),
)

V16 = Migration(
    16,
    "curves paced by request rate and made by sweeps or imports; GPU throttle reasons and energy counter",
    (
        # A curve's points are concurrencies (closed loop: C streams, each sending its next request when the
        # last ends) or request rates (open loop: arrivals paced at R requests/s, at most C in flight).
        "ALTER TABLE curves ADD COLUMN rate TEXT",  # JSON list of the points' rates (req/s); NULL: closed loop
        "ALTER TABLE curves ADD COLUMN burstiness REAL",  # gamma shape of the arrivals (1: Poisson); NULL: closed
        # console (campaign curve), sweep (a sweep's arm x shape over its concurrency list), imported
        "ALTER TABLE curves ADD COLUMN source TEXT NOT NULL DEFAULT 'console' "
        "CHECK (source IN ('console', 'sweep', 'imported'))",
        "ALTER TABLE curves ADD COLUMN sweep_id INTEGER",  # the sweep whose walk measured it (source sweep)
        "ALTER TABLE curves ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        # How the points were chosen: NULL, the list given; else JSON, e.g. {"mode": "workload", "iters": 4} or
        # {"mode": "slo", "limits": {"ttft": 500.0}}: their points are added as the walk measures them.
        "ALTER TABLE curves ADD COLUMN plan TEXT",
        # curve_points loses UNIQUE (curve_id, concurrency): a rate curve's points share their cap C.
        """CREATE TABLE curve_points_v16 (
            curve_id INTEGER NOT NULL REFERENCES curves(id) ON DELETE CASCADE,
            concurrency INTEGER NOT NULL,               -- the streams in flight at this point (its -c; a rate
                                                        -- point's cap)
            position INTEGER NOT NULL,                  -- 0.. in the order the points were planned
            state TEXT NOT NULL DEFAULT 'pending'       -- pending, running (or its console died), done, failed
                CHECK (state IN ('pending', 'running', 'done', 'failed')),
            reason TEXT,                                -- why it failed or was interrupted; NULL otherwise
            repeat_group TEXT,                          -- bench_runs.repeat_group of its runs (repeat above 1)
            bench_run_ids TEXT,                         -- JSON list of its bench_runs ids, in run order
            started_ms INTEGER,                         -- when its latest measurement began
            ended_ms INTEGER,                           -- when it was stored, failed or interrupted
            rate REAL,                                  -- requests/s its arrivals were paced at; NULL: closed loop
            replaced_run_ids TEXT,                      -- JSON list of the rows of earlier, invalid measurements
                                                        -- of this point (kept, no longer linked); NULL: none
            PRIMARY KEY (curve_id, position)
        )""",
        """INSERT INTO curve_points_v16 (curve_id, concurrency, position, state, reason, repeat_group,
                                        bench_run_ids, started_ms, ended_ms)
           SELECT curve_id, concurrency, position, state, reason, repeat_group, bench_run_ids, started_ms,
                  ended_ms FROM curve_points""",
        "DROP TABLE curve_points",
        "ALTER TABLE curve_points_v16 RENAME TO curve_points",
        # How a bench run was paced: NULL rate, every request at once up to C (vLLM's --request-rate inf).
        "ALTER TABLE bench_runs ADD COLUMN request_rate REAL",  # requests/s of its arrivals
        "ALTER TABLE bench_runs ADD COLUMN burstiness REAL",  # gamma shape of its arrivals (1: Poisson)
        # NVML's clocks event (throttle) reasons bitmask at the sample (nvmlDeviceGetCurrentClocksEventReasons);
        # NULL: not read. And its total energy counter since the driver loaded (nvmlDeviceGetTotalEnergyConsumption),
        # mJ; NULL: the GPU has none.
        "ALTER TABLE gpu_samples ADD COLUMN throttle_reasons INTEGER",
        "ALTER TABLE gpu_samples ADD COLUMN energy_mj INTEGER",
    ),
)

V17 = Migration(
    17,
    "speculative decoding counters per bench run",
    (
        # vLLM's spec-decode counters over the run, summed over its servers (agents/loadgen/specdecode.py);
        # NULL: the servers export none (no --speculative-config). Acceptance rate is accepted / draft tokens,
        # mean accepted length 1 + accepted / drafts (vLLM's definitions, console/readmodel/records.py).
        "ALTER TABLE bench_runs ADD COLUMN spec_drafts INTEGER",  # draft proposals (one per sequence and step)
        "ALTER TABLE bench_runs ADD COLUMN spec_draft_tokens INTEGER",  # tokens proposed by the drafter
        "ALTER TABLE bench_runs ADD COLUMN spec_accepted INTEGER",  # of those, tokens the target accepted
        "ALTER TABLE bench_runs ADD COLUMN spec_accepted_per_pos TEXT",  # JSON list: accepted at draft position i
    ),
)

V18 = Migration(
    18,
    "a demo's recorded history traces to its import: GPU and server samples, check verdicts, timers, sweeps",
    (
        # NULL: recorded by this console. Set: built by ops/demo_history.py from the import's published figures
        # (imports.provenance says which), deleted with it; never read as a measurement of this campaign.
        "ALTER TABLE gpu_samples ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        "ALTER TABLE server_samples ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        "ALTER TABLE check_verdicts ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        "ALTER TABLE timers ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
        "ALTER TABLE sweeps ADD COLUMN import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE",
    ),
)

V19 = Migration(
    19,
    "economics as published: what a box's price is, the run an API price was scored by, the model index, "
    "published figures",
    (
        # What price_per_hour is: a basis of the cost model (console/economics/costs.py: list, committed,
        # fully_loaded, vast_on_demand) that economics prices the box on, or NULL: the operator's own price.
        "ALTER TABLE boxes ADD COLUMN price_basis TEXT",
        "ALTER TABLE boxes ADD COLUMN price_provenance TEXT",  # where the price comes from, in words
        # The quality run (quality_runs.label) that scored the endpoint this price buys, on the suite's items.
        "ALTER TABLE api_prices ADD COLUMN accuracy_run TEXT",
        """CREATE TABLE model_index (
            model TEXT PRIMARY KEY,
            value REAL,                                 -- NULL: absent from the index's view (printed "-")
            estimate INTEGER NOT NULL DEFAULT 0,        -- 1: the publisher's value is an estimate
            index_name TEXT NOT NULL,                   -- e.g. Artificial Analysis Intelligence Index
            version TEXT NOT NULL,                      -- e.g. v4.2
            as_of TEXT NOT NULL,                        -- the index's date, YYYY-MM-DD
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE
        )""",
        # A figure someone published that is read beside the console's own (a frontier row's printed cost, a
        # per-hour row, a table column that conflicts with another table), never priced or ranked.
        """CREATE TABLE published_figures (
            id INTEGER PRIMARY KEY,
            source_table TEXT NOT NULL,                 -- the table of the write-up it was printed in
            arm TEXT NOT NULL,
            box TEXT,
            shape TEXT,
            concurrency INTEGER,
            figures TEXT NOT NULL,                      -- JSON object: name -> number as printed
            note TEXT,                                  -- why it differs from what the data gives, if it does
            provenance TEXT,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE
        )""",
    ),
)

V20 = Migration(
    20,
    "what a serving env carried: each launch's engine-patch digests, each box's engine versions",
    (
        # JSON {patch: sha256 or null} the box's probe found for the patches the arm needed
        # (console/checks/serving_env.py); NULL: the arm needed none.
        "ALTER TABLE launches ADD COLUMN patch_digests TEXT",
        # JSON {package: version} of vllm, torch, flashinfer-python/-jit-cache/-cubin at the box's newest
        # check; NULL: never read (an older agent, or never checked).
        "ALTER TABLE boxes ADD COLUMN serving_versions TEXT",
    ),
)

V21 = Migration(
    21,
    "house-suite runs: the caps and request timeout sent, and which items have no score and why",
    (
        # JSON {"*": N or "window", family: N}: the generation caps the console sent ("window": the context
        # window minus the prompt); NULL: a harness file's run (its own settings are in sampling).
        "ALTER TABLE quality_runs ADD COLUMN caps TEXT",
        "ALTER TABLE quality_runs ADD COLUMN request_timeout_s REAL",  # seconds one request was given
        # JSON {"family/item_id": why}: items that timed out or failed, left out of the accuracy (seed-gaps
        # F20) and run again by `campaign quality run --complete`; NULL: not listed (a harness file's run).
        "ALTER TABLE quality_runs ADD COLUMN unscored_items TEXT",
    ),
)

V22 = Migration(
    22,
    "queued work: what a campaign queued and had not run, with the words that queued it; published speculation",
    (
        # Never a launch or a bench row (console/store/queued.py): a queued item is neither a result nor a
        # failure. Read only by the handover's "Queued / open" section.
        """CREATE TABLE queued_work (
            id INTEGER PRIMARY KEY,
            import_id INTEGER REFERENCES imports(id) ON DELETE CASCADE,  -- the import that listed it
            box TEXT,                                   -- where it is queued; NULL: the source names no box
            arm TEXT,                                   -- the arm to run; NULL: several (what says which)
            model TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('launch', 'repeat', 'eval')),  -- launch: an arm never served;
                                                        -- repeat: another run of an arm with figures; eval: a
                                                        -- quality run
            list TEXT,                                  -- the queue list it is on (box/lists/control600w.txt)
            what TEXT NOT NULL,                         -- the item in words
            sentence TEXT NOT NULL,                     -- the source's own words that queue it
            section TEXT NOT NULL,                      -- where the source says it
            t_ms INTEGER NOT NULL                       -- when it was stored
        )""",
        # A drafter arm's speculation as someone else published it, where the counters (V17) are unknown: the
        # tokens drafted per step and the share of drafted tokens accepted (the write-up's "3 draft tokens, 10%
        # accepted"). NULL: not published; a row measured here has its counters instead.
        "ALTER TABLE bench_runs ADD COLUMN spec_tokens INTEGER",
        "ALTER TABLE bench_runs ADD COLUMN spec_acceptance_published REAL",
    ),
)

V23 = Migration(
    23,
    "specdiff: greedy sequence comparisons of a speculative server against its base, read against a control",
    (
        """CREATE TABLE specdiff_runs (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,                -- the specdiff command's id (specdiff-...)
            box TEXT,
            model TEXT,
            spec_launch TEXT, base_launch TEXT,         -- the speculative server and the same without speculation
            control_launch_a TEXT, control_launch_b TEXT,  -- the control's two captures (equal: one server twice)
            spec_arm TEXT NOT NULL, base_arm TEXT NOT NULL, control_arm TEXT NOT NULL,
            speculative_config TEXT,                    -- SPEC's --speculative-config as its argv gave it
            t_ms INTEGER NOT NULL,
            prompt_count INTEGER NOT NULL,
            max_tokens INTEGER, seed INTEGER,           -- every generation: greedy (temperature 0), this seed
            pair_matched INTEGER NOT NULL,              -- prompts whose spec and base token ids are identical
            control_matched INTEGER NOT NULL,           -- prompts the control reproduced
            min_control INTEGER NOT NULL,               -- reproductions a verdict needs (default: every prompt)
            duration_s REAL,
            verdict TEXT,                               -- the read model's words (docs/specdiff.md)
            raw TEXT                                    -- the tool's JSON as it came, its items aside
        )""",
        "CREATE INDEX specdiff_runs_t ON specdiff_runs(t_ms)",
        """CREATE TABLE specdiff_items (
            run INTEGER NOT NULL REFERENCES specdiff_runs(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,                       -- the prompt's place in the run's list
            prompt TEXT NOT NULL,
            spec_tokens TEXT NOT NULL, base_tokens TEXT NOT NULL,  -- JSON lists of generated token ids
            control_a_tokens TEXT NOT NULL, control_b_tokens TEXT NOT NULL,
            spec_text TEXT, base_text TEXT,
            pair_diverge_at INTEGER,                    -- first generated token where spec and base differ; NULL: identical
            control_diverge_at INTEGER,                 -- the same for the control's two captures
            PRIMARY KEY (run, idx)
        )""",
    ),
)

V24 = Migration(
    24,
    "a published quality run's per-family accuracies",
    (
        # JSON {maths: 0.862, ...}: the family figures the write-up printed for a run it gives no items for
        # (the four quantisers' "maths (common)"); a run scored per item has its families in quality_items.
        "ALTER TABLE quality_runs ADD COLUMN published_families TEXT",
    ),
)

V25 = Migration(
    25,
    "how an endpoint's quality run was served: provider, precision, routing; degenerate rate; why it stopped",
    (
        # The write-up's API runs name who served them (OpenRouter's default routing or a pinned provider) and
        # at what precision (FP8, FP4): "API quality is a property of the routed deployment". NULL: not given.
        "ALTER TABLE quality_runs ADD COLUMN provider TEXT",
        "ALTER TABLE quality_runs ADD COLUMN precision TEXT",
        "ALTER TABLE quality_runs ADD COLUMN routing TEXT",  # default or pinned
        # share of answers that degenerated into repetition, where published (DeepSeek's list tier 3.0%)
        "ALTER TABLE quality_runs ADD COLUMN degenerate_rate REAL",
        # why a run ended short of its suite ("HTTP 402": the key hit its credit limit); items says how far
        "ALTER TABLE quality_runs ADD COLUMN stopped TEXT",
    ),
)

V26 = Migration(
    26,
    "a bench row's published decode step time and per-stream output rate",
    (
        # The write-up gives some figures only in its prose: "the decode step took about 200 ms" (GLM TP4),
        # "each stream 20 tokens a second at concurrency 256". Numbers, so an export can list them; NULL: not given.
        "ALTER TABLE bench_runs ADD COLUMN step_ms REAL",
        "ALTER TABLE bench_runs ADD COLUMN per_stream_out_tok_s REAL",
    ),
)

# One minute of each GPU's samples as count, sum, min and max per charted column, so a 7- or 30-day Live
# window reads ~43,000 rows per GPU instead of 2.6 million. Triggers keep it in the writer's transaction
# (ingest, imports, an import's cascade delete); an ignored duplicate fires no insert trigger.
ROLLUP_BUCKET_MS = 60_000
ROLLUP_COLUMNS = ("power_w", "enforced_limit_w", "sm_clock_mhz", "util_pct", "mem_used_mib")
_ROLLUP_NAMES = ", ".join(f"{c}_n, {c}_sum, {c}_min, {c}_max" for c in ROLLUP_COLUMNS)
"""Every rollup tier's columns after (box, gpu, t_ms), in their order."""
_ROLLUP_DECL = ", ".join(
    f"{c}_n INTEGER NOT NULL DEFAULT 0, {c}_sum REAL, {c}_min REAL, {c}_max REAL" for c in ROLLUP_COLUMNS
)
"""Their declarations, the same in every tier's table."""


def rollup_rebuild_sql(where: str, verb: str = "INSERT") -> str:
    """``verb`` INTO gpu_rollup_1m the minutes of the gpu_samples rows ``where`` selects, from raw rows: the
    backfill, the delete trigger and ingest (console/store/rollups.py) share this one aggregate."""
    aggregate = ", ".join(f"count({c}), sum({c}), min({c}), max({c})" for c in ROLLUP_COLUMNS)
    return (
        f"{verb} INTO gpu_rollup_1m(box, gpu, t_ms, {_ROLLUP_NAMES}) "
        f"SELECT box, gpu, (t_ms / {ROLLUP_BUCKET_MS}) * {ROLLUP_BUCKET_MS} AS m, {aggregate} "
        f"FROM gpu_samples {where} GROUP BY box, gpu, m"
    )


def _rollup_statements() -> tuple[str, ...]:
    cols = ROLLUP_COLUMNS
    bucket = f"(NEW.t_ms / {ROLLUP_BUCKET_MS}) * {ROLLUP_BUCKET_MS}"
    values = ", ".join(f"NEW.{c} IS NOT NULL, NEW.{c}, NEW.{c}, NEW.{c}" for c in cols)
    merge = ", ".join(
        f"{c}_n = {c}_n + excluded.{c}_n, "
        f"{c}_sum = coalesce({c}_sum + excluded.{c}_sum, {c}_sum, excluded.{c}_sum), "
        f"{c}_min = coalesce(min({c}_min, excluded.{c}_min), {c}_min, excluded.{c}_min), "
        f"{c}_max = coalesce(max({c}_max, excluded.{c}_max), {c}_max, excluded.{c}_max)"
        for c in cols
    )
    rebuild = rollup_rebuild_sql
    old_bucket = f"(OLD.t_ms / {ROLLUP_BUCKET_MS}) * {ROLLUP_BUCKET_MS}"
    same = f"box = OLD.box AND gpu = OLD.gpu AND t_ms >= {old_bucket} AND t_ms < {old_bucket} + {ROLLUP_BUCKET_MS}"
    return (
        f"""CREATE TABLE gpu_rollup_1m (
            box TEXT NOT NULL, gpu INTEGER NOT NULL, t_ms INTEGER NOT NULL,  -- the minute's start
            {_ROLLUP_DECL},
            PRIMARY KEY (box, gpu, t_ms)
        ) WITHOUT ROWID""",
        rebuild(""),
        f"""CREATE TRIGGER gpu_rollup_1m_insert AFTER INSERT ON gpu_samples BEGIN
            INSERT INTO gpu_rollup_1m(box, gpu, t_ms, {_ROLLUP_NAMES}) VALUES (NEW.box, NEW.gpu, {bucket}, {values})
            ON CONFLICT(box, gpu, t_ms) DO UPDATE SET {merge};
        END""",
        f"""CREATE TRIGGER gpu_rollup_1m_delete AFTER DELETE ON gpu_samples BEGIN
            DELETE FROM gpu_rollup_1m WHERE box = OLD.box AND gpu = OLD.gpu AND t_ms = {old_bucket};
            {rebuild("WHERE " + same)};
        END""",
    )


V27 = Migration(27, "per-minute GPU rollups kept beside gpu_samples", _rollup_statements())

# A per-row trigger made ingest 1.65x slower; ingest and imports now rebuild the minutes a batch touched
# in one statement after their bulk insert (console/store/rollups.py). Deletes keep their trigger.
V28 = Migration(
    28, "GPU rollups rebuilt per batch, not per inserted row", ("DROP TRIGGER gpu_rollup_1m_insert",)
)

# A 30-day window of 236 buckets still read ~43,000 minutes a GPU (~150-210 ms for 8 GPUs, bench/tui.py): a
# ten-minute tier, the aggregate of the minutes under it, cuts that tenfold. It is kept from gpu_rollup_1m by
# triggers, so whatever writes the minutes (ingest's refresh, an import, gpu_samples' delete trigger) keeps
# it too; a REPLACE of a minute fires only the insert trigger, which rebuilds the whole ten minutes.
ROLLUP_TIERS_MS = (ROLLUP_BUCKET_MS, 10 * ROLLUP_BUCKET_MS)
"""The rollup tiers' bucket widths, finest first: a chart reads the coarsest one its buckets span."""


def rollup_table(bucket_ms: int) -> str:
    """The table of the rollup tier ``bucket_ms`` wide (one of ``ROLLUP_TIERS_MS``)."""
    return f"gpu_rollup_{bucket_ms // 60_000}m"


def _rollup_10m_statements() -> tuple[str, ...]:
    tier, table = ROLLUP_TIERS_MS[1], rollup_table(ROLLUP_TIERS_MS[1])
    merged = ", ".join(f"sum({c}_n), sum({c}_sum), min({c}_min), max({c}_max)" for c in ROLLUP_COLUMNS)

    def rebuild(verb: str, where: str) -> str:
        return (
            f"{verb} INTO {table}(box, gpu, t_ms, {_ROLLUP_NAMES}) "
            f"SELECT box, gpu, (t_ms / {tier}) * {tier} AS m, {merged} FROM gpu_rollup_1m {where} GROUP BY box, gpu, m"
        )

    def same(row: str) -> str:
        start = f"({row}.t_ms / {tier}) * {tier}"
        return f"WHERE box = {row}.box AND gpu = {row}.gpu AND t_ms >= {start} AND t_ms < {start} + {tier}"

    return (
        f"""CREATE TABLE {table} (
            box TEXT NOT NULL, gpu INTEGER NOT NULL, t_ms INTEGER NOT NULL,  -- the ten minutes' start
            {_ROLLUP_DECL},
            PRIMARY KEY (box, gpu, t_ms)
        ) WITHOUT ROWID""",
        rebuild("INSERT", ""),
        f"""CREATE TRIGGER {table}_insert AFTER INSERT ON gpu_rollup_1m BEGIN
            {rebuild("INSERT OR REPLACE", same("NEW"))};
        END""",
        f"""CREATE TRIGGER {table}_delete AFTER DELETE ON gpu_rollup_1m BEGIN
            DELETE FROM {table} WHERE box = OLD.box AND gpu = OLD.gpu AND t_ms = (OLD.t_ms / {tier}) * {tier};
            {rebuild("INSERT", same("OLD"))};
        END""",
    )


V29 = Migration(29, "ten-minute GPU rollups kept from the per-minute ones", _rollup_10m_statements())

MIGRATIONS: tuple[Migration, ...] = (
    V1,
    V2,
    V3,
    V4,
    V5,
    V6,
    V7,
    V8,
    V9,
    V10,
    V11,
    V12,
    V13,
    V14,
    V15,
    V16,
    V17,
    V18,
    V19,
    V20,
    V21,
    V22,
    V23,
    V24,
    V25,
    V26,
    V27,
    V28,
    V29,
)
LATEST = MIGRATIONS[-1].version
