import ParkWiseContract

// Outbox records are written on every edge (an event's `add`, its `del` once acknowledged): by hand, byte for byte
// as JSONEncoder with `.sortedKeys` and `.withoutEscapingSlashes` writes them (the event's own bytes are the ones it
// is published with, encoded once: `OutboxEntry.wire`). WireWriterTests check every byte against JSONEncoder.
// Files written before escaped slashes (`\/`); every JSON reader, this one included, reads both.

extension OutboxEntry: WireWritable {
    public func write(to w: inout WireWriter) {
        w.open()
        w.integer("arrival_mono", ifPresent: arrivalMonotonic.map { Int($0) })
        w.integer("at_mono", Int(atMonotonic))
        w.key("event")
        if encodable { w.raw(wire) } else { w.fail() }
        w.string("kernel_boot", kernelBoot)
        w.close()
    }
}

extension OutboxLog.Record: WireWritable {
    func write(to w: inout WireWriter) {
        w.open()
        if let add {
            w.key("add")
            add.write(to: &w)
        }
        w.unsigned("del", ifPresent: del)
        w.unsigned("drop", ifPresent: drop)
        w.unsigned("drop_to", ifPresent: dropTo)
        w.unsigned("floor", ifPresent: floor)
        w.unsigned("format", ifPresent: format)
        w.close()
    }

    /// The record's JSON in the outbox file; empty where JSONEncoder would have thrown (a NaN), as it always was.
    var json: [UInt8] {
        WireWriter.written { write(to: &$0) } ?? []
    }
}
