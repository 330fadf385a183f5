"""Opening state.db: creation with mode 0600, WAL, forward migrations, read-only browsing.

Only ``console.store`` writes the database; everything else goes through a Store. A Store opened
read-only (``campaign browse``) refuses every write, so an offline replay can never alter a campaign.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from console.store.boxes import Boxes
from console.store.checks import Checks
from console.store.commands import Commands
from console.store.curves import Curves
from console.store.errors import ReadOnlyStore, StoreError, StoreTooNew, disk_full, full_disk_guard
from console.store.ingest import Ingest
from console.store.kldiff import Kldiff
from console.store.launches import Launches
from console.store.quality import Quality
from console.store.queued import Queued
from console.store.results import Results
from console.store.schema import LATEST, MIGRATIONS
from console.store.specdiff import Specdiff
from console.store.sweeps import Sweeps
from console.store.timers import Timers
from console.timeutil import Clock, system_clock

DEFAULT_DB = "state.db"


def resolve_db_path(cli_value: str | None) -> Path:
    """``--db`` beats ``CAMPAIGN_DB`` beats ``./state.db``."""
    return Path(cli_value or os.environ.get("CAMPAIGN_DB") or DEFAULT_DB)


SQLITE_HEADER = b"SQLite format 3\x00"

_held: Counter[tuple[int, int]] = Counter()
"""The state.db files (device, inode) this process holds open Stores on, and how many.

WHY: SQLite's connections coordinate through POSIX record locks, and those belong to the process: closing
*any* descriptor of the file releases every lock the process holds on it. A header read after a connection
is open would leave that connection unlocked; another process closing its own last connection then finds
the file free, checkpoints and deletes the WAL under it, and every later write of this process goes to a
deleted file (a console's service writing while `campaign bench` ran: its commits never reached state.db,
a fresh connection read "disk I/O error"). So a file this process already holds is never opened again
outside SQLite: it was checked when it was first opened.
"""
_held_lock = threading.Lock()


def _create_private(path: Path) -> None:
    """Create an empty file readable by its owner only, before SQLite ever opens it.

    A missing folder is refused rather than created: a mistyped ``--db`` must not quietly start a new,
    empty campaign somewhere else.
    """
    if not path.parent.is_dir():
        raise StoreError(
            f"{path}: the folder {path.parent} does not exist; create it first or give another --db path"
        )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot create a state.db in {path.parent} ({exc.strerror})",
            "give a --db path in a folder you can write",
        ) from exc
    os.close(fd)


def _refuse_foreign(path: Path) -> None:
    """An existing path must be a state.db (a SQLite file): anything else is refused untouched.

    SQLite itself would turn an empty file into a new database, block on a FIFO and write beside a device;
    a mistyped ``--db`` must never make any of them a campaign or change their mode.
    """
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(
            f"{path} is not a regular file (a device, FIFO or socket), so not a state.db",
            "give --db a state.db file, or a new path to start a campaign",
        )
    if st.st_size == 0:
        raise StoreError(
            f"{path} is an empty file, not a state.db",
            "remove it to start a campaign there, or give another --db path",
        )
    with _held_lock:
        if _held[(st.st_dev, st.st_ino)]:
            return  # checked when this process first opened it; reading it now would drop its locks
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path} cannot be read ({exc.strerror})", "check its permissions") from exc
    if header != SQLITE_HEADER:
        raise StoreError(
            f"{path} is not a SQLite database, so not a state.db", "point --db or CAMPAIGN_DB at another path"
        )


def _writable(path: Path) -> str | None:
    """Why ``path`` cannot be written (its file, or its folder where SQLite keeps the -wal and -shm), or None."""
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(path.parent, os.W_OK):
        return f"its folder {path.parent} is read-only"
    return None


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection. In a folder it cannot write, SQLite cannot make the WAL's shared-memory file,
    so the database is opened immutable: nothing can be writing it there."""
    immutable = "&immutable=1" if not os.access(path.parent, os.W_OK) else ""
    return sqlite3.connect(f"file:{path.resolve()}?mode=ro{immutable}", uri=True, check_same_thread=False)


def _schema_version(conn: sqlite3.Connection) -> int:
    has = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
    ).fetchone()
    if not has:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        if tables:
            raise StoreError(
                "this SQLite file has tables but no schema_migrations table: it is not a campaign "
                "state.db; point --db or CAMPAIGN_DB at another path"
            )
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


class Store:
    """One state.db. Repositories hang off it by domain (``store.boxes``, ...)."""

    def __init__(self, path: Path | str, *, read_only: bool = False, clock: Clock = system_clock):
        self.path = Path(path)
        self.read_only = read_only
        self.created = False  # True when this open created the file (first start)
        self.clock = clock
        self.notice: str | None = None  # said to the operator when the store opened other than asked
        self._check_path()
        conn = self._connect()
        version = self._read_schema_version(conn)
        if version > LATEST:  # refused before anything below could change the file, its mode included
            conn.close()
            raise StoreTooNew(
                f"{self.path} has schema version {version}, newer than the {LATEST} this campaign-console "
                "understands; upgrade campaign-console (pip install -U campaign-console) to open it"
            )
        self._make_private()
        self.db = sqlite_utils.Database(conn)
        if self.read_only:
            self._open_for_browsing(conn, version)
            self.schema_version = version
        else:
            self._open_for_writing(conn, version)
            self.schema_version = LATEST
        st = self.path.stat()
        self._held_key: tuple[int, int] | None = (st.st_dev, st.st_ino)
        with _held_lock:
            _held[self._held_key] += 1
        self.boxes = Boxes(self)
        self.checks = Checks(self)
        self.timers = Timers(self)
        self.commands = Commands(self)
        self.launches = Launches(self)
        self.ingest = Ingest(self)
        self.results = Results(self)
        self.sweeps = Sweeps(self)
        self.quality = Quality(self)
        self.kldiff = Kldiff(self)
        self.specdiff = Specdiff(self)
        self.curves = Curves(self)
        self.queued = Queued(self)

    # -- opening ---------------------------------------------------------------------------------
    def _check_path(self) -> None:
        """Refuse a path that is not a state.db (or, to browse, one that does not exist) before SQLite opens
        it; an existing file this console cannot write is opened read-only, with a notice saying why."""
        if self.path.is_dir():
            raise StoreError(
                f"{self.path} is a directory; give a state.db file in it, e.g. {self.path / DEFAULT_DB}"
            )
        if self.path.exists():
            _refuse_foreign(self.path)
            why = None if self.read_only else _writable(self.path)
            if why is not None:
                self.read_only = True
                self.notice = (
                    f"{self.path} opened read-only: {why}; anything that would change the campaign "
                    "is refused (copy the file somewhere writable to act on it)"
                )
        elif self.read_only:
            raise StoreError(f"{self.path}: no such database to browse")

    def _connect(self) -> sqlite3.Connection:
        """The connection; a writable open of a missing path creates the file first, readable by its owner only."""
        if self.read_only:
            return _connect_read_only(self.path)
        self.created = not self.path.exists()
        if self.created:
            _create_private(self.path)
        return sqlite3.connect(self.path, check_same_thread=False)

    def _read_schema_version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version; a file SQLite cannot read as a campaign's closes ``conn`` and is refused."""
        try:
            conn.execute("PRAGMA busy_timeout = 10000")
            return _schema_version(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            full = disk_full(exc, self.path)  # its shared-memory file could not even be made
            if full is not None:
                raise full from exc
            raise StoreError(
                f"{self.path} cannot be read as a campaign state.db ({exc}); point --db or CAMPAIGN_DB at "
                "another path"
            ) from exc
        except StoreError:
            conn.close()
            raise

    def _make_private(self) -> None:
        """A state.db holds host keys and the campaign's record; nobody else should read it. Only a file known
        to be one, and one this console will open, is tightened: a mistyped --db or a refused database must
        not have its mode changed."""
        if not self.read_only and stat.S_IMODE(self.path.stat().st_mode) & 0o077:
            os.chmod(self.path, 0o600)

    def _open_for_browsing(self, conn: sqlite3.Connection, version: int) -> None:
        """Browsing never writes, so it cannot upgrade an older file: refused, saying how to do it deliberately."""
        if version < LATEST:
            conn.close()
            raise StoreError(
                f"{self.path} has schema version {version}, older than {LATEST}; browsing never writes, "
                f"so upgrade it once with `campaign --db {self.path} box list` (a .v{version}.bak copy is kept)"
            )
        conn.execute("PRAGMA query_only = ON")

    def _open_for_writing(self, conn: sqlite3.Connection, version: int) -> None:
        """WAL, foreign keys and the migrations up to LATEST; on any failure a file this open created is removed."""
        try:
            with full_disk_guard(self.path):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                self._migrate(version)
        except BaseException:
            conn.close()
            if self.created:  # a half-made file would read as "not a state.db" next time: leave none
                self._remove_created()
            raise

    def _remove_created(self) -> None:
        for leftover in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self.db.conn.close()
        with _held_lock:
            if self._held_key is not None:
                _held[self._held_key] -= 1
                if _held[self._held_key] <= 0:
                    del _held[self._held_key]
                self._held_key = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self, from_version: int) -> None:
        if from_version == LATEST:
            return
        if from_version > 0:
            # Keep the pre-upgrade file: a migration bug must never cost a campaign its record.
            # Through SQLite's backup API, never a file copy: no descriptor of state.db is opened beside the
            # connection (``_held`` says why that matters).
            backup = self.path.with_name(f"{self.path.name}.v{from_version}.bak")
            os.close(os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
            os.chmod(backup, 0o600)
            copy = sqlite3.connect(backup)
            try:
                self.db.conn.backup(copy)
            finally:
                copy.close()
        with self.db.atomic():
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
            )
            for m in MIGRATIONS:
                if m.version <= from_version:
                    continue
                for statement in m.statements:
                    self.db.execute(statement)
                self.db.table("schema_migrations").insert(
                    {"version": m.version, "name": m.name, "applied_ms": self.clock()}
                )

    # -- primitives for repositories -------------------------------------------------------------
    def check_writable(self) -> None:
        if self.read_only:
            if self.notice:  # read-only because the file or its folder cannot be written
                raise ReadOnlyStore(self.notice)
            raise ReadOnlyStore(f"{self.path} is open read-only (browse mode); this action is disabled")

    @contextmanager
    def atomic(self) -> Iterator[sqlite_utils.Database]:
        """One transaction (savepoint when nested). Writers must go through this.

        The outermost one begins IMMEDIATE: it takes the write lock up front, so two consoles writing one
        state.db (a one-shot connect while another follows) queue on the busy timeout instead of one failing
        with "database is locked" when its read transaction tries to become a write.
        """
        self.check_writable()
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic() as db:
                yield db
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def insert(self, table: str, values: dict[str, Any]) -> int:
        """Insert one row (inside ``atomic()``) and return its rowid.

        The migrations made every table, so sqlite-utils only writes the row: it is never let add a column
        (``alter`` stays off). A loop of rows whose ids nobody needs goes to ``insert_all`` instead: one
        statement per hundred rows rather than one per row.
        """
        rowid = self.db.table(table).insert(values).last_rowid
        assert rowid is not None
        return rowid

    def rows(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """Read rows as dicts; the TUI and exports read through the store's query helpers.

        Straight through the connection, not sqlite-utils' query(): that wraps every read in a savepoint and
        its release, two more SQLite calls, each of which gives up the interpreter lock (a Live redraw made
        36 of them beside an ingesting thread: bench/tui_ingest.py). Columns named twice are renamed as
        query() renames them."""
        cursor = self.db.execute(sql, params)
        if cursor.description is None:
            raise ValueError(f"Store.rows reads rows; this statement returns none (use execute()): {sql}")
        keys = sqlite_utils.utils.dedupe_keys(d[0] for d in cursor.description)
        return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.db.execute(sql, params).fetchone()
        return None if row is None else row[0]
