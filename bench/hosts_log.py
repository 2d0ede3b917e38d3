"""Reading a bench/compare_hosts.sh log: its configurations ("## H hosts x R
ranks per host, RATE links; ... the job's probe: U us one way, G Gbit/s[, a gap
of P us][; the machine's stream: S Gbit/s]"),
its collectives ("### coll, ...") and their table rows. One place for the
format, for bench/reprice_hosts.py and bench/summarize_hosts.py."""
import re
from dataclasses import dataclass

_CONFIG = re.compile(r"## (\d+) hosts x (\d+) ranks per host, (\S+) links;"
                     r"(?:.*probe: ([\d.]+) us one way, ([\d.]+) Gbit/s(?:, a gap of ([\d.]+) us)?)?"
                     r"(?:.*the machine's stream: ([\d.]+) Gbit/s)?")
_COLL = re.compile(r"### (\w+),")
_SIZE = re.compile(r"\d+[KMG]?")


def bytes_of(size):
    """'512K' -> 524288 (powers of 1024, as compare_hosts.sh's sizes)."""
    m = re.fullmatch(r"(\d+)([KMG]?)", size)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


@dataclass
class Config:
    hosts: int
    per_host: int
    links: str           # "unshaped" or the rate, e.g. "4gbit"
    probe_us: float      # the job's probe (0: none)
    probe_gbit: float
    probe_gap_us: float  # the sender's gap between small messages (0: not in the log, before session 33)
    stream_gbit: float   # one stream between two namespaces, unshaped (0: not in the log, before session 33)

    @property
    def ranks(self):
        return self.hosts * self.per_host

    @property
    def label(self):
        return f"{self.hosts}x{self.per_host} {self.links}"


@dataclass
class Row:
    config: Config
    coll: str
    size: str            # as the table writes it ("512K")
    cells: list          # the table's cells, size first

    @property
    def braid_us(self):
        return float(self.cells[1].split()[0])

    @property
    def mpi_us(self):
        return float(self.cells[3].split()[0])

    @property
    def sim_us(self):
        return float(self.cells[6])

    @property
    def braid_over_sim(self):
        """From the two times: the table's ratio has two decimals, and 0.80
        printed may be 0.796, outside 25%."""
        return self.braid_us / self.sim_us

    @property
    def braid_over_ceiling(self):
        """Braid's busbw over the ceiling, or None on unshaped links."""
        return float(self.cells[9]) if len(self.cells) >= 10 else None


def read(path):
    """Every table row of the log, in order, with its configuration."""
    config = coll = None
    for line in open(path):
        m = _CONFIG.match(line)
        if m:
            config = Config(int(m.group(1)), int(m.group(2)), m.group(3), float(m.group(4) or 0),
                            float(m.group(5) or 0), float(m.group(6) or 0), float(m.group(7) or 0))
            coll = None
            continue
        m = _COLL.match(line)
        if m:
            coll = m.group(1)
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if config and coll and len(cells) >= 8 and _SIZE.fullmatch(cells[0]):
            yield Row(config, coll, cells[0], cells)
