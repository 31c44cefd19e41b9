#!/usr/bin/perl
# Builds the location + ASN database pairs that tests/unit/test_geoip.c, test_view.c and
# tests/integration/test_gslb_geoip.py read for maps with `geoip.asn-database` (a City
# database and an ASN database walked as one). Requires Debian's libmaxmind-db-writer-perl;
# the small outputs are committed so the tests do not need perl. Regenerate with:
#
#   cd tests/data/gslb/mmdb && perl make_pair_mmdb.pl
#
# test-pair-city.mmdb (GeoLite2-City) + test-pair-asn.mmdb (GeoLite2-ASN), hand-made overlaps:
#   1.0.0.0/16 Shanghai        | 1.0.0.0/24 AS4134, 1.0.1.0/24 AS4812   ASN narrower than City
#   14.1.0.0/16 Beijing,       | 14.0.0.0/8 AS4837                      ASN wider than City
#   14.200.0.0/16 Shanghai     |
#   58.32.0.0/13 Shanghai      | 58.32.0.0/13 AS4812                    the same block
#   36.0.0.0/12 -              | 36.0.0.0/12 AS4538                     ASN only
#   5.1.0.0/16 Frankfurt       | -                                      City only
#   101.0.0.0/12 Shanghai      | 101.4.0.0/14 AS4134, 101.8.0.0/13 AS4134  two ASN blocks, same ASN
#   240e::/20 Shanghai         | 240e::/24 AS4134, 240e:100::/24 AS4812
#   2001:da8::/32 Beijing      | 2001:da8::/48 AS23910
#   -                          | 2408:8000::/20 AS4837
#
# test-pair-rand-city.mmdb + test-pair-rand-asn.mmdb: `perl make_pair_mmdb.pl --random N SEED
# PREFIX` writes PREFIX-city.mmdb and PREFIX-asn.mmdb with N random, nested and overlapping
# networks each inside a few /8s (and a few IPv6 /16s), drawing from a few records, so both trees
# cut each other everywhere. The committed pair is `--random 1500 7 test-pair-rand`.
#
# `perl make_pair_mmdb.pl --large N PREFIX` writes a measurement pair (not committed): N City
# networks (/20 to /24, N/8 distinct records) and N ASN networks (/16 to /26, 5,000 ASNs) spread
# over the IPv4 unicast space, each inserted wider first so that most survive, plus N/8 IPv6
# networks each; `test_geoip PREFIX-city.mmdb PREFIX-asn.mmdb` then measures the pair walk.
use strict;
use warnings;

use MaxMind::DB::Writer::Tree;

my %TYPES = (
	autonomous_system_number       => 'uint32',
	autonomous_system_organization => 'utf8_string',
	geoname_id                     => 'uint32',
	latitude                       => 'double',
	longitude                      => 'double',
	accuracy_radius                => 'uint16',
	subdivisions                   => [ 'array', 'map' ],
	map { $_ => 'map' } qw(continent country registered_country city names location postal),
);

sub new_tree {
	my (%args) = @_;
	return MaxMind::DB::Writer::Tree->new(
		ip_version            => 6,
		record_size           => 24,
		languages             => ['en'],
		description           => { en => 'Steer unit test data, not real geolocation' },
		map_key_type_callback => sub { $TYPES{ $_[0] } // 'utf8_string' },
		alias_ipv6_to_ipv4    => 1,
		%args,
	);
}

sub write_tree {
	my ( $tree, $file ) = @_;
	open my $fh, '>:raw', $file or die "$file: $!\n";
	$tree->write_tree($fh);
	close $fh or die "$file: $!\n";
}

sub place {
	my ( $cont, $cc, $sub, $city, $geoname, $lat, $lon ) = @_;
	my %r = ( continent => { code => $cont }, country => { iso_code => $cc } );
	$r{subdivisions} = [ { iso_code => $sub } ] if defined $sub;
	$r{city} = { geoname_id => $geoname, names => { en => $city } } if defined $city;
	$r{location} = { latitude => $lat, longitude => $lon, accuracy_radius => 50 } if defined $lat;
	return \%r;
}

sub asn {
	my ($n) = @_;
	return { autonomous_system_number => $n, autonomous_system_organization => "AS$n org" };
}

my %PLACE = (
	SH  => place( 'AS', 'CN', '31', 'Shanghai', 1796236, 31.2222, 121.4581 ),
	BJ  => place( 'AS', 'CN', '11', 'Beijing', 1816670, 39.9075, 116.3972 ),
	FRA => place( 'EU', 'DE', 'HE', 'Frankfurt am Main', 2925533, 50.1109, 8.6821 ),
);

sub build_small {
	my $city = new_tree( database_type => 'GeoLite2-City' );
	my @city = (
		[ '1.0.0.0/16',    'SH' ], [ '14.1.0.0/16',   'BJ' ], [ '14.200.0.0/16', 'SH' ],
		[ '58.32.0.0/13',  'SH' ], [ '5.1.0.0/16',    'FRA' ], [ '101.0.0.0/12', 'SH' ],
		[ '240e::/20',     'SH' ], [ '2001:da8::/32', 'BJ' ],
	);
	$city->insert_network( $_->[0], $PLACE{ $_->[1] } ) for @city;
	write_tree( $city, 'test-pair-city.mmdb' );

	my $asn = new_tree( database_type => 'GeoLite2-ASN' );
	my @asn = (
		[ '1.0.0.0/24',   4134 ], [ '1.0.1.0/24',    4812 ],  [ '14.0.0.0/8',     4837 ],
		[ '58.32.0.0/13', 4812 ], [ '36.0.0.0/12',   4538 ],  [ '101.4.0.0/14',   4134 ],
		[ '101.8.0.0/13', 4134 ], [ '240e::/24',     4134 ],  [ '240e:100::/24',  4812 ],
		[ '2001:da8::/48', 23910 ], [ '2408:8000::/20', 4837 ],
	);
	$asn->insert_network( $_->[0], asn( $_->[1] ) ) for @asn;
	write_tree( $asn, 'test-pair-asn.mmdb' );
}

# Random networks inside a few /8s (IPv4) and /16s (IPv6): lengths from 9 to 28 (IPv4) and
# 17 to 64 (IPv6), so the two databases overlap at every depth.
sub random_net {
	my @v4 = ( 1, 14, 58, 101, 202 );
	if ( rand() < 0.85 ) {
		my $len  = 9 + int( rand(20) );
		my $addr = ( $v4[ int( rand(@v4) ) ] << 24 ) | int( rand( 1 << 24 ) );
		$addr &= ( 0xFFFFFFFF << ( 32 - $len ) ) & 0xFFFFFFFF;
		return sprintf( '%d.%d.%d.%d/%d', $addr >> 24, ( $addr >> 16 ) & 255, ( $addr >> 8 ) & 255,
			$addr & 255, $len );
	}
	my @v6  = ( 0x240e, 0x2408, 0x2001 );
	my $len = 17 + int( rand(48) );
	my @w   = ( $v6[ int( rand(@v6) ) ], map { int( rand(65536) ) } 1 .. 3 );
	for my $i ( 0 .. 3 ) {    # clear the bits beyond the prefix
		my $keep = $len - 16 * $i;
		$w[$i] = $keep >= 16 ? $w[$i] : $keep <= 0 ? 0 : $w[$i] & ( 0xFFFF << ( 16 - $keep ) ) & 0xFFFF;
	}
	return sprintf( '%x:%x:%x:%x::/%d', @w, $len );
}

sub build_random {
	my ( $n, $seed, $prefix ) = @_;
	srand($seed);
	my @places = (
		@PLACE{qw(SH BJ FRA)},
		place( 'AS', 'CN', '44', 'Guangzhou', 1809858, 23.1167, 113.25 ),
		place( 'AS', 'CN', '44', 'Shenzhen',  1795565, 22.5431, 114.0579 ),
		place( 'AS', 'CN', '61' ),
		place( 'AS', 'CN' ),
		place( 'AS', 'JP', '13', 'Tokyo', 1850147, 35.6895, 139.6917 ),
		place( 'EU', 'FR', 'IDF', 'Paris', 2988507, 48.8566, 2.3522 ),
		place( 'NA', 'US', 'CA', 'Los Angeles', 5368361, 34.0522, -118.2437 ),
		place( 'NA', 'US', 'NY', 'New York', 5128581, 40.7128, -74.0060 ),
	);
	my @asns = ( 4134, 4812, 4837, 4538, 9808, 2516, 3356, 174, 23910, 64512 );
	# A few thousand distinct records as real databases have (postal codes, networks).
	my $city = new_tree( database_type => 'GeoLite2-City' );
	for my $i ( 1 .. $n ) {
		my %r = %{ $places[ int( rand(@places) ) ] };
		$r{postal} = { code => sprintf( '%05d', int( rand( $n / 4 + 1 ) ) ) };
		$city->insert_network( random_net(), \%r );
	}
	write_tree( $city, "$prefix-city.mmdb" );
	my $asn = new_tree( database_type => 'GeoLite2-ASN' );
	for my $i ( 1 .. $n ) {
		my $a = $asns[ int( rand(@asns) ) ];
		$asn->insert_network( random_net(),
			{ autonomous_system_number => $a, autonomous_system_organization => "AS$a " . int( rand(8) ) } );
	}
	write_tree( $asn, "$prefix-asn.mmdb" );
}

sub large_nets {
	my ( $n, $min, $max, $v6min, $v6max ) = @_;
	my ( @nets, %seen );
	while ( @nets < $n ) {
		my $len = $min + int( rand( $max - $min + 1 ) );
		my $a   = 1 + int( rand(222) );
		next if $a == 10 || $a == 127 || $a == 100 || $a == 169 || $a == 172 || $a == 192;
		my $addr = ( ( $a << 24 ) | int( rand( 1 << 24 ) ) ) & ( 0xFFFFFFFF << ( 32 - $len ) ) & 0xFFFFFFFF;
		my $net = sprintf( '%d.%d.%d.%d/%d', $addr >> 24, ( $addr >> 16 ) & 255, ( $addr >> 8 ) & 255,
			$addr & 255, $len );
		push @nets, [ $len, $net ] unless $seen{$net}++;
	}
	for my $i ( 1 .. int( $n / 8 ) ) {
		my $len = $v6min + int( rand( $v6max - $v6min + 1 ) );
		my @w = ( 0x2400 + int( rand(256) ), int( rand(65536) ), int( rand(65536) ), 0 );
		for my $k ( 0 .. 3 ) {
			my $keep = $len - 16 * $k;
			$w[$k] = $keep >= 16 ? $w[$k] : $keep <= 0 ? 0 : $w[$k] & ( 0xFFFF << ( 16 - $keep ) ) & 0xFFFF;
		}
		push @nets, [ $len, sprintf( '%x:%x:%x:%x::/%d', @w, $len ) ];
	}
	return map { $_->[1] } sort { $a->[0] <=> $b->[0] } @nets;    # wider first
}

sub build_large {
	my ( $n, $prefix ) = @_;
	srand(1);
	my @conts = qw(AS EU NA OC);
	my @recs;
	for my $i ( 0 .. int( $n / 8 ) ) {
		my %r = %{ place( $conts[ $i % 4 ], sprintf( '%c%c', 65 + $i % 26, 65 + int( $i / 26 ) % 26 ),
			sprintf( '%d', $i % 97 ), "City $i", 100000 + $i,
			-60 + ( $i * 7919 % 12000 ) / 100, -180 + ( $i * 104729 % 36000 ) / 100 ) };
		$r{postal} = { code => sprintf( '%05d', $i ) };
		push @recs, \%r;
	}
	my $city = new_tree( database_type => 'GeoLite2-City' );
	$city->insert_network( $_, $recs[ int( rand(@recs) ) ] ) for large_nets( $n, 20, 24, 32, 48 );
	write_tree( $city, "$prefix-city.mmdb" );
	my $asn = new_tree( database_type => 'GeoLite2-ASN' );
	for my $net ( large_nets( $n, 16, 26, 28, 56 ) ) {
		my $a = 1 + int( rand(5000) );
		$asn->insert_network( $net, asn($a) );
	}
	write_tree( $asn, "$prefix-asn.mmdb" );
}

if ( @ARGV == 3 && $ARGV[0] eq '--large' ) {
	build_large( $ARGV[1], $ARGV[2] );
} elsif ( @ARGV == 4 && $ARGV[0] eq '--random' ) {
	build_random( $ARGV[1], $ARGV[2], $ARGV[3] );
} elsif (@ARGV) {
	die "usage: $0 [--random N SEED PREFIX | --large N PREFIX]\n";
} else {
	build_small();
}
