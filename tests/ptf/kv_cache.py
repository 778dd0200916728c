"""Key-value cache on p4src/inc.p4 (docs/protocol.md, "Key-value cache"): misses stamped
and routed to the server, replies filling the entry, hits answered by the switch, writes
leaving the old value served until their reply passes, and admission (only the server's
port may reply).

Job 1: client 0 on port 1, storage server on port 3, cache entries 0..3, key 5 cached by
the controller's own code (``controller.systems.kv_cache.cache_keys``: a new generation,
the stamp). Port 5 is a host outside the job.
"""

from __future__ import annotations

from inc_ptf import IncTest, host
from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.systems import kv_cache
from controller.systems.kv_cache import KvCacheRequest
from wire.header import KV_ANSWERED_BY_SWITCH, KV_VALUE_WORDS, SLOTS, Flag, Op
from wire.scapy_layers import INC

CLIENT, SERVER, OUTSIDER = 1, 3, 5
KEY, OTHER_KEY = 5, 9
VALUE = [11 * (i + 1) for i in range(KV_VALUE_WORDS)]


def slots(key: int, value: list[int] | None = None) -> list[int]:
    v = value or [0] * KV_VALUE_WORDS
    return [key, *v] + [0] * (SLOTS - 1 - len(v))


class KvTest(IncTest):
    def setUp(self) -> None:
        super().setUp()
        fields = self.hosts_for((CLIENT,), agg_port=SERVER)
        req = KvCacheRequest(kind="kv_cache", server=SERVER, cache_size=4, **fields)
        self.job = self.admit(req, job_id=1, offset=0)
        self.call(kv_cache.cache_keys(self.sw, self.job, [KEY]))
        entry = self.call(kv_cache.cached_keys(self.sw, self.job))[KEY]
        self.stamp = self.call(self.sw.read_register(kv_cache.GEN, entry))  # its generation

    def request(self, op: Op, key: int, psn: int, value: list[int] | None = None):
        return self.inc_packet(host(CLIENT), host(SERVER), ident=psn, op=op, job_id=1,
                               worker_id=0, psn=psn, values=slots(key, value))  # fmt: skip

    def reply(self, op: Op, key: int, psn: int, stamp: int, version: int, value: list[int]):
        return self.inc_packet(host(SERVER), host(CLIENT), ident=psn, op=op, flags=Flag.RESULT,
                               job_id=1, worker_id=0, psn=psn, agg_idx=stamp, bitmap=version,
                               values=slots(key, value))  # fmt: skip

    def deliver(self, reply) -> None:
        """A server reply goes through the switch on to the client, unchanged but routed."""
        self.send(SERVER, reply)
        testutils.verify_packet(self, self.routed(reply, CLIENT), CLIENT)

    def stamped(self, pkt, stamp: int):
        """``pkt`` as the switch sends it on to the server: stamp written, UDP checksum 0."""
        out = self.routed(pkt, SERVER)
        out[INC].agg_idx = stamp
        out[UDP].chksum = 0
        return Ether(bytes(out))

    def answered(self, request, version: int, value: list[int]):
        """The switch's own answer to ``request`` from the cache entry."""
        res = request.copy()
        res[Ether].src, res[Ether].dst = request[Ether].dst, request[Ether].src
        res[IP].src, res[IP].dst = request[IP].dst, request[IP].src
        res[IP].ttl = 64
        del res[IP].chksum
        res[INC].flags = Flag.RESULT
        res[INC].bitmap = version
        res[INC].epoch = KV_ANSWERED_BY_SWITCH
        res[INC].values = slots(request[INC].values[0], value)
        return Ether(bytes(res))


class ReadOfCachedKeyIsAnsweredOnceAReplyFilledTheEntry(KvTest):
    """The first read of a cached key goes to the server stamped with the entry's
    generation; the server's reply fills the entry on its way; the next read is answered by
    the switch with the value and its version."""

    def runTest(self) -> None:
        first = self.request(Op.KV_READ, KEY, psn=1)
        self.send(CLIENT, first)
        testutils.verify_packet(self, self.stamped(first, self.stamp), SERVER)
        self.deliver(self.reply(Op.KV_READ, KEY, psn=1, stamp=self.stamp, version=3, value=VALUE))
        second = self.request(Op.KV_READ, KEY, psn=2)
        self.send(CLIENT, second)
        testutils.verify_packet(self, self.answered(second, 3, VALUE), CLIENT)
        testutils.verify_no_other_packets(self)
        self.assert_no_drops()


class WriteLeavesTheValueServedUntilItsReplyAndAnOlderReplyNeverFills(KvTest):
    """A write goes to the server stamped and leaves the entry valid: until its reply
    passes, the write has not completed, so reads still get the old value; a late reply
    of an older version changes nothing; the write's own reply (newer) fills the entry."""

    def runTest(self) -> None:
        self.deliver(self.reply(Op.KV_READ, KEY, psn=1, stamp=self.stamp, version=3, value=VALUE))
        write = self.request(Op.KV_WRITE, KEY, psn=2, value=[7] * KV_VALUE_WORDS)
        self.send(CLIENT, write)
        testutils.verify_packet(self, self.stamped(write, self.stamp), SERVER)
        self.deliver(self.reply(Op.KV_READ, KEY, psn=1, stamp=self.stamp, version=2, value=VALUE))
        read = self.request(Op.KV_READ, KEY, psn=3)
        self.send(CLIENT, read)  # the write is in flight: the old value, from the switch
        testutils.verify_packet(self, self.answered(read, 3, VALUE), CLIENT)
        new = [7] * KV_VALUE_WORDS
        self.deliver(self.reply(Op.KV_WRITE, KEY, psn=2, stamp=self.stamp, version=4, value=new))
        again = self.request(Op.KV_READ, KEY, psn=4)
        self.send(CLIENT, again)
        testutils.verify_packet(self, self.answered(again, 4, new), CLIENT)
        testutils.verify_no_other_packets(self)


class UncachedKeyGoesToTheServerUnstamped(KvTest):
    def runTest(self) -> None:
        read = self.request(Op.KV_READ, OTHER_KEY, psn=1, value=None)
        read[INC].agg_idx = 77  # whatever a client writes there, the switch clears it
        read = Ether(bytes(read))
        self.send(CLIENT, read)
        testutils.verify_packet(self, self.stamped(read, 0), SERVER)
        self.assert_no_drops()


class RepliesFromAnyPortButTheServersAreDropped(KvTest):
    """A reply forged by a host that is not the job's server, and a request in the client's
    name from another port, are dropped as UNKNOWN_WORKER and fill nothing."""

    def runTest(self) -> None:
        forged = self.reply(Op.KV_READ, KEY, psn=1, stamp=self.stamp, version=9, value=[66] * 8)
        self.send(OUTSIDER, forged)
        self.send(OUTSIDER, self.request(Op.KV_READ, KEY, psn=2))
        self.assert_drops(UNKNOWN_WORKER=2)
        read = self.request(Op.KV_READ, KEY, psn=3)
        self.send(CLIENT, read)  # still empty: to the server
        testutils.verify_packet(self, self.stamped(read, self.stamp), SERVER)
        self.assertEqual(self.register(kv_cache.VERSION, 0), 0)
