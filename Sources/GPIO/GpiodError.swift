import SystemIO

/// A failed libgpiod call: the errno it left (both libgpiod adapters, 1.6 and 2.x, throw these).
struct GpiodError: Error {
    var errno: Errno
}

/// A refused line request: the errno, and who held the line (kernel consumer label) when there was one.
struct LineRequestError: Error {
    var errno: Errno
    var holder: String?
}
