/*
 * echo.c: the floor of serving DNS over UDP on Linux: a loop that reads a
 * batch of datagrams with one blocking recvmmsg, sets the QR bit of each
 * (so dnsperf counts it as an answer, the query's own bytes otherwise)
 * and sends the batch back with one sendmmsg. No parsing, no lookup, no
 * allocation: what is left is the kernel's share of the work that every
 * DNS server pays for each query, plus the least a loop in C adds.
 *
 * Usage: echo ADDR PORT [BATCH]     (BATCH: datagrams per call, default 32)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXBATCH 256
#define BUFSIZE 4096

static unsigned char bufs[MAXBATCH][BUFSIZE];
static struct sockaddr_in addrs[MAXBATCH];
static struct iovec iovs[MAXBATCH];
static struct mmsghdr in[MAXBATCH], out[MAXBATCH];

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: echo ADDR PORT [BATCH]\n");
		return 2;
	}
	int batch = argc > 3 ? atoi(argv[3]) : 32;
	if (batch < 1 || batch > MAXBATCH) {
		fprintf(stderr, "echo: BATCH must be 1 to %d\n", MAXBATCH);
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
	if (fd < 0 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("echo: socket or bind");
		return 1;
	}
	for (;;) {
		for (int i = 0; i < batch; i++) {
			iovs[i].iov_base = bufs[i];
			iovs[i].iov_len = BUFSIZE;
			memset(&in[i].msg_hdr, 0, sizeof in[i].msg_hdr);
			in[i].msg_hdr.msg_name = &addrs[i];
			in[i].msg_hdr.msg_namelen = sizeof addrs[i];
			in[i].msg_hdr.msg_iov = &iovs[i];
			in[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(fd, in, batch, MSG_WAITFORONE, NULL);
		if (n < 0) {
			perror("echo: recvmmsg");
			continue;
		}
		int m = 0;
		for (int i = 0; i < n; i++) {
			if (in[i].msg_len < 12)
				continue;
			bufs[i][2] |= 0x80;
			iovs[i].iov_len = in[i].msg_len;
			out[m].msg_hdr = in[i].msg_hdr;
			out[m].msg_len = 0;
			m++;
		}
		for (int sent = 0; sent < m;) {
			int k = sendmmsg(fd, out + sent, m - sent, 0);
			if (k <= 0) {
				perror("echo: sendmmsg");
				break;
			}
			sent += k;
		}
	}
}
