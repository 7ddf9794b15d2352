/* An MPI program as a user would write one, for test/mpi.test.sh: two ranks ping-pong a
 * message of each size (small ones go eagerly, large ones by the transport's rendezvous,
 * which over RDMA is a READ or a WRITE of the sender's buffer), every byte checked at both
 * ends, then an MPI_Allreduce. Rank 0 prints a line per size and exits 0 when every message
 * arrived intact.
 *   mpirun -np 2 ... mpi_pingpong [ROUNDS] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const int sizes[] = { 1, 64, 4096, 65536, 1 << 20, 4 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The byte at offset i of round r's message from rank `from`. */
static uint8_t pattern(int from, int r, size_t i)
{
	return (uint8_t)(from * 131 + r * 7 + i * 13 + (i >> 12));
}

static void fill(uint8_t *buf, size_t len, int from, int r)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(from, r, i);
}

static long count_wrong(const uint8_t *buf, size_t len, int from, int r)
{
	long wrong = 0;

	for (size_t i = 0; i < len; i++)
		wrong += buf[i] != pattern(from, r, i);
	return wrong;
}

/* One size, ROUNDS round trips; the bytes found wrong at this rank. */
static long ping_pong(int rank, uint8_t *buf, int len, int rounds, double *seconds)
{
	int peer = 1 - rank;
	long wrong = 0;
	double t0 = MPI_Wtime();

	for (int r = 0; r < rounds; r++) {
		if (rank == 0) {
			fill(buf, (size_t)len, 0, r);
			MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD);
			MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			wrong += count_wrong(buf, (size_t)len, 1, r);
		} else {
			MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			wrong += count_wrong(buf, (size_t)len, 0, r);
			fill(buf, (size_t)len, 1, r);
			MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD);
		}
	}
	*seconds = MPI_Wtime() - t0;
	return wrong;
}

int main(int argc, char **argv)
{
	int rank, nranks, rounds = argc > 1 ? atoi(argv[1]) : 100;
	long wrong_here = 0, wrong_all = 0, ranks_sum = 0, one = 1;
	uint8_t *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || rounds < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi_pingpong: wants 2 ranks (has %d) and ROUNDS >= 1\n", nranks);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	buf = malloc((size_t)sizes[NSIZES - 1]);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size_t s = 0; s < NSIZES; s++) {
		int n = sizes[s] >= (1 << 20) ? (rounds + 9) / 10 : rounds;
		double seconds;
		long wrong = ping_pong(rank, buf, sizes[s], n, &seconds);

		wrong_here += wrong;
		if (rank == 0)
			printf("%8d bytes x %4d: %9.1f us a round trip, %ld bytes wrong\n", sizes[s], n,
			       seconds / n * 1e6, wrong);
	}
	MPI_Allreduce(&wrong_here, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&one, &ranks_sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("allreduce: %ld ranks, %ld bytes wrong in all\n", ranks_sum, wrong_all);
	free(buf);
	MPI_Finalize();
	return wrong_all != 0 || ranks_sum != 2;
}
