"""The consumer: everything that runs on the compute nodes of a streaming job.

Two components live here, each a package of its own: ``nodegroup`` (the service: receive a scan's
sectors, assemble and count its frames, gather the parts on MPI rank 0 and write the scan's file)
and ``counting`` (the library it counts with: electron counting as stempy does it and the counted
file format, which the live view, ``export`` and the tests also read without a NodeGroup). This
package imports neither, so that reading a counted file never loads the service
(docs/architecture.md, "Components").
"""
